"""Relay driver: GRPO training as a relay of one DataProto between Ray actors.

    python trainer.py [--config configs/<preset>.yaml] [--set key=value ...] [--print-config]

With no Ray cluster it starts a local one; with ``RAY_ADDRESS`` set (or under
``ray job submit -- python trainer.py``) it joins that cluster.

One step: rollout -> (actor_ref log-probs || reward) -> GRPO advantage (here) -> learner update ->
weight sync to the rollout engine and the actor copy.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from placement.plan import PlacementError, build_plan
from relay.config import ConfigError, LoadedConfig, load_config, print_warnings, unsupported
from relay.data_proto import DataProto
from relay.grpo import get_advantage_estimator, group_rows, kl_penalized_scores
from relay.models.paths import ModelPathError, resolve_model_path
from relay.step_log import MetricsWriter, merge_rank_metrics, table_header, table_row

REPO = Path(__file__).resolve().parent

# What each role is sent: only the fields it reads cross the object store.
ACTOR_REF_INPUTS = ["input_ids", "attention_mask", "position_ids", "response_mask", "rollout_log_probs"]
REWARD_INPUTS = ["response_text", "ground_truth", "question", "uid"]
LEARNER_INPUTS = (
    "input_ids",
    "attention_mask",
    "position_ids",
    "response_mask",
    "advantages",
    "ref_log_probs",
    "old_log_probs",
    "rollout_log_probs",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Relay: GRPO post-training on Ray")
    p.add_argument("--config", default=str(REPO / "configs" / "default.yaml"), help="YAML preset")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config value (repeatable), e.g. --set rollout.n=8",
    )
    p.add_argument("--print-config", action="store_true", help="print the merged config and exit")
    p.add_argument("--explain", action="store_true", help="with --print-config: where each value came from")
    p.add_argument(
        "--print-plan",
        action="store_true",
        help="print the placement plan for the running cluster (RAY_ADDRESS), a declared one "
        "(--set cluster.nodes=...), or this machine, and whether it fits; starts no roles",
    )
    return p.parse_args(argv)


def pop_metrics(part: DataProto) -> dict[str, float]:
    """Each role reports its metrics in ``meta_info["metrics"]``; take them out before merging batches."""
    return part.meta_info.pop("metrics", {})


def advantage_phase(batch: DataProto, cfg: Any) -> tuple[DataProto, dict[str, float]]:
    """GRPO group-relative advantages on the driver (numpy; microseconds for a step's batch).

    With ``algorithm.use_kl_in_reward`` the scores first lose ``kl_coef`` x each response's summed
    KL to the reference (old-policy log-probs when the batch has them, else the rollout's).
    """
    alg = cfg.algorithm
    scores = batch.batch["scores"]
    metrics: dict[str, float] = {}
    if alg.use_kl_in_reward:
        policy = batch.batch.get("old_log_probs", batch.batch["rollout_log_probs"])
        scores, kl = kl_penalized_scores(
            scores, policy, batch.batch["ref_log_probs"], batch.batch["response_mask"], alg.kl_coef, alg.kl_loss_type
        )
        metrics["reward/kl_penalty_mean"] = float(alg.kl_coef * kl.mean())
        metrics["reward/penalized_mean"] = float(scores.mean())
    estimator = get_advantage_estimator(alg.adv_estimator)
    token_adv, seq_adv = estimator(
        scores, batch.non_tensor["uid"], batch.batch["response_mask"], norm_by_std=alg.norm_adv_by_std
    )
    out = batch.union(DataProto.from_dict(batch={"advantages": token_adv.astype(np.float32)}))
    return out, {
        **metrics,
        "advantage/abs_mean": float(np.abs(seq_adv).mean()),
        "advantage/zero_groups_frac": _zero_group_frac(batch),
    }


def _zero_group_frac(batch: DataProto) -> float:
    """Share of prompt groups whose samples all scored the same (they carry no gradient)."""
    scores = batch.batch["scores"]
    return float(np.mean([np.ptp(scores[rows]) == 0 for rows in group_rows(batch.non_tensor["uid"])]))


def batch_metrics(batch: DataProto) -> dict[str, float]:
    lengths = batch.batch["response_length"]
    return {
        "reward/mean": float(batch.batch["scores"].mean()),
        "reward/std": float(batch.batch["scores"].std()),
        "reward/accuracy": float(batch.batch["acc"].mean()),
        "response/length_mean": float(lengths.mean()),
        "response/length_max": float(lengths.max()),
        "batch/sequences": float(len(batch)),
        "batch/prompt_width": float(batch.batch["prompts"].shape[1]),
        "batch/response_width": float(batch.batch["responses"].shape[1]),
    }


def run_step(roles: Any, prompts: DataProto, cfg: Any, step: int) -> tuple[DataProto, dict[str, float]]:
    """One GRPO step across the roles; returns the final batch and the step's metrics."""
    from roles import fanout
    from roles.launch import call

    m: dict[str, float] = {"step": step}
    t0 = time.perf_counter()
    gen = fanout.generate(roles.rollout, prompts, step)
    t1 = time.perf_counter()
    # Log-probs and grading both need only the rollout output: run them at the same time.
    lp_refs = fanout.submit_shares(roles.actor_ref, "compute_log_probs", gen.select(ACTOR_REF_INPUTS, []))
    rw_ref = roles.reward.score.remote(gen.select(non_tensor_keys=REWARD_INPUTS))
    lp = fanout.gather_rows("actor_ref", lp_refs, "actor_ref log-probs")
    (rw,) = call(["reward-0"], [rw_ref], "reward")
    t2 = time.perf_counter()
    for part in (gen, lp, rw):
        m.update(pop_metrics(part))
    batch = gen.union(lp).union(rw)
    batch, adv_metrics = advantage_phase(batch, cfg)
    m.update(adv_metrics)
    t3 = time.perf_counter()
    train_keys = [k for k in LEARNER_INPUTS if k in batch.batch]
    if cfg.rollout.sleep_during_update:
        fanout.each(roles.rollout, "rollout", "sleep", "rollout sleep")
    # Every learner host gets its share of the rows at once (the update is one JAX job across them).
    refs = fanout.submit_shares(roles.learners, "update", batch.select(train_keys, []))
    outs = call(fanout.names("learner", refs), refs, "update")
    weights_ref = outs[0][1]  # rank 0 publishes the weights
    m.update(merge_rank_metrics([metrics for metrics, _ in outs]))
    t4 = time.perf_counter()
    if cfg.rollout.sleep_during_update:
        fanout.each(roles.rollout, "rollout", "wake_up", "rollout wake-up")
    rollout_load, actor_load = fanout.load_weights(roles, weights_ref, step + 1)
    t5 = time.perf_counter()
    m.update(batch_metrics(batch))
    m["sync/seconds"] = m["sync/export_seconds"] + (t5 - t4)  # learner export + put, then engines' loads
    m["sync/rollout_load_seconds"] = rollout_load
    m["sync/actor_load_seconds"] = actor_load
    m.update(
        {
            "timing/rollout": t1 - t0,
            "timing/actor_ref_and_reward": t2 - t1,
            "timing/advantage": t3 - t2,
            "timing/update": t4 - t3,
            "timing/sync": t5 - t4,
            "timing/step": t5 - t0,
        }
    )
    compute = sum(m.get(k, 0.0) for k in ("timing/rollout_compute", "timing/update_compute"))
    compute += max(m.get("timing/actor_ref_compute", 0.0), m.get("timing/reward_compute", 0.0))
    compute += m["sync/export_seconds"] + max(rollout_load, actor_load)
    m["memory/roles_peak_rss_gib"] = sum(
        v for k, v in m.items() if k.startswith("memory/") and k.endswith("_peak_rss_gib")
    )
    m["timing/driver_and_ray_overhead"] = max(0.0, m["timing/step"] - compute)
    return batch, m


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        loaded = load_config(args.config, args.overrides)
        if args.print_config or args.explain:
            print(loaded.explain() if args.explain else loaded.to_yaml(), end="")
            print_warnings(loaded)
            return 0
        if args.print_plan:
            return print_plan(loaded)
        problems = unsupported(loaded.cfg)
        if problems:
            raise ConfigError("not supported by this build yet:\n  " + "\n  ".join(problems))
        model_path = resolve_model_path(loaded.cfg.model.path)
        build_plan(loaded.cfg)  # impossible layouts are config errors, found before Ray starts
    except (ConfigError, ModelPathError, PlacementError) as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 2
    print_warnings(loaded)
    return train(loaded, model_path, Path(args.config).stem)


def print_plan(loaded: LoadedConfig) -> int:
    """``--print-plan``: exit 0 when the plan fits the cluster, 2 when it does not."""
    from placement.cluster import declared_nodes, ray_init_address, ray_nodes, this_machine
    from placement.fit import print_plan as render

    cfg = loaded.cfg
    address = ray_init_address()
    if cfg.cluster.nodes is not None:
        nodes, source = declared_nodes(cfg.cluster), "declared by cluster.* (all resources free)"
    elif address != "local":
        import ray

        ray.init(address=address, log_to_driver=False)
        try:
            nodes, source = ray_nodes(), f"the running Ray cluster at {address}"
        finally:
            ray.shutdown()
    else:
        nodes, source = this_machine(), "this machine (a local Ray would be started here)"
    text, fits = render(cfg, nodes, source)
    print(text)
    print_warnings(loaded)
    return 0 if fits else 2


def train(loaded: LoadedConfig, model_path: Path, preset_name: str) -> int:
    """Start Ray and the roles, run the configured steps, write metrics; returns the exit code."""
    cfg = loaded.cfg
    import ray
    from tqdm import tqdm
    from transformers import AutoTokenizer

    from placement.cluster import ray_init_address, ray_nodes
    from placement.fit import plan_for
    from relay.data import DatasetError
    from relay.data.prompt_source import PromptSource
    from roles.dashboard_metrics import StepGauges
    from roles.launch import RoleFailedError, start_roles, stop_roles

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_path))
        prompts = PromptSource.from_config(cfg.data, tokenizer, loaded.derived.effective_global_prompts)
    except (DatasetError, FileNotFoundError) as exc:
        print(f"data error: {exc}", file=sys.stderr)
        return 2

    run_name = cfg.trainer.run_name or f"{preset_name}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    run_dir = Path(cfg.trainer.output_dir) / run_name
    if run_dir.exists():
        print(
            f"config error: trainer.run_name={run_name!r}: {run_dir} exists; pick another name",
            file=sys.stderr,
        )
        return 2
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(loaded.to_yaml())
    writer = MetricsWriter(run_dir)

    ray.init(address=ray_init_address(), log_to_driver=True)
    roles = None
    try:
        plan = plan_for(cfg, ray_nodes())
        roles = start_roles(loaded, plan, str(model_path), run_id=run_name)
        gauges = StepGauges(run_name)
        tqdm.write(f"roles started in Ray namespace {roles.namespace}: {', '.join(roles.handles())}")
        tqdm.write(table_header())
        steps = range(cfg.trainer.total_training_steps)
        for step in tqdm(steps, desc="grpo steps", unit="step", file=sys.stderr):
            if cfg.trainer.total_epochs is not None and prompts.epochs_done >= cfg.trainer.total_epochs:
                tqdm.write(f"stopping: trainer.total_epochs={cfg.trainer.total_epochs} passes over the data done")
                break
            _, metrics = run_step(roles, prompts.next_batch(), cfg, step)
            metrics["data/epochs_done"] = float(prompts.epochs_done)
            writer.write(metrics)
            gauges.publish(metrics)
            tqdm.write(table_row(metrics))
    except PlacementError as exc:
        print(f"placement error: {exc}", file=sys.stderr)
        return 2
    except RoleFailedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        stop_roles(roles)
        ray.shutdown()
    print(f"metrics: {writer.path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
