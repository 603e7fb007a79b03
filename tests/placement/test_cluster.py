"""Node lists for the fit check, and which Ray the trainer connects to."""

import socket

from placement.cluster import declared_nodes, ray_init_address, this_machine
from placement.plan import GIB
from relay.config import load_config


def test_declared_gpu_node_and_tpu_hosts() -> None:
    cfg = load_config(
        overrides=["cluster.nodes=2", "cluster.gpus_per_node=4", "cluster.tpu_hosts=2", "cluster.tpus_per_host=8"],
        environ={},
    ).cfg
    nodes = declared_nodes(cfg.cluster)
    assert [n.name for n in nodes] == ["node-0", "node-1", "tpu-host-0", "tpu-host-1"]
    assert nodes[0].total == {"CPU": 8.0, "GPU": 4.0, "memory": 64.0 * GIB} and nodes[0].free == nodes[0].total
    assert nodes[3].total == {"CPU": 8.0, "TPU": 8.0, "memory": 64.0 * GIB}
    assert declared_nodes(load_config(environ={}).cfg.cluster) == []  # nodes: null -> not declared


def test_this_machine_counts_its_cpus() -> None:
    (node,) = this_machine()
    assert node.total["CPU"] >= 1 and node.total["memory"] > 0 and "GPU" not in node.total  # no GPU here


def test_ray_address_env_wins_and_a_dead_head_is_ignored(tmp_path) -> None:
    stale = tmp_path / "ray_current_cluster"
    assert ray_init_address({"RAY_ADDRESS": "10.0.0.1:6379"}, stale) == "10.0.0.1:6379"
    assert ray_init_address({}, stale) == "local"  # no file
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    stale.write_text(f"127.0.0.1:{dead}")
    assert ray_init_address({}, stale) == "local"
    with socket.socket() as live:
        live.bind(("127.0.0.1", 0))
        live.listen()
        stale.write_text(f"127.0.0.1:{live.getsockname()[1]}")
        assert ray_init_address({}, stale) == f"127.0.0.1:{live.getsockname()[1]}"


def test_a_raylet_port_that_refuses_connections_counts_as_lost() -> None:
    """What :func:`placement.cluster.lost_nodes` asks of a node's raylet: does its port accept a connection."""
    import socket

    from placement.cluster import _accepts

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert _accepts("127.0.0.1", port)
    assert not _accepts("127.0.0.1", port)  # closed, as a killed raylet's is
