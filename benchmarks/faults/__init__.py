"""Does a run survive faults unchanged: seeded fault injection resumed as a user would, compared with the same job
run without faults, and the known-bad recoveries its verdict must catch."""
