"""Relay's benchmarks, grouped by the question each answers: :mod:`benchmarks.speed` (how fast, against peers and
itself), :mod:`benchmarks.learning` (does training make the model better), :mod:`benchmarks.faults` (does a run
survive faults unchanged), :mod:`benchmarks.gpu` (the learner on a GPU), with :mod:`benchmarks.harness` the pieces
they and the tests share. ``python -m benchmarks.<group>`` lists a group's benchmarks and the command of each."""
