"""One rule sizes both pools of worker processes: the grader's and the analysis's."""

from __future__ import annotations

import os

import pytest

from analysis.engine import workers as analysis_workers
from pr1_eval import processes
from pr1_eval.errors import Pr1EvalError
from pr1_eval.grading import pool as grading_pool


def test_unset_means_the_usable_cpus_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("X_WORKERS", raising=False)
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert processes.usable_cpus() == expected
    monkeypatch.setattr(processes, "usable_cpus", lambda: 12)
    assert processes.default_workers(processes.Pool("X_WORKERS", 8, "test")) == 8
    monkeypatch.setattr(processes, "usable_cpus", lambda: 3)
    assert processes.default_workers(processes.Pool("X_WORKERS", 8, "test")) == 3
    monkeypatch.setenv("X_WORKERS", "  ")  # blank is unset
    assert processes.default_workers(processes.Pool("X_WORKERS", 8, "test")) == 3


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_value_is_an_error_naming_the_variable_for_both_pools(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    for env, sized in ((grading_pool.WORKERS_ENV, lambda: processes.default_workers(grading_pool.GRADING_POOL)),
                       (analysis_workers.WORKERS_ENV, lambda: processes.default_workers(analysis_workers.ANALYSIS_POOL))):
        monkeypatch.setenv(env, value)
        with pytest.raises(Pr1EvalError, match=f"{env}={value!r} is not a positive integer.*unset it"):
            sized()
        monkeypatch.setenv(env, "5")  # the variable wins over the cap and the CPUs
        assert sized() == 5
        monkeypatch.delenv(env)


def test_both_pools_follow_the_one_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "usable_cpus", lambda: 64)
    monkeypatch.delenv(grading_pool.WORKERS_ENV, raising=False)
    monkeypatch.delenv(analysis_workers.WORKERS_ENV, raising=False)
    assert processes.default_workers(grading_pool.GRADING_POOL) == grading_pool.MAX_WORKERS == 8
    assert processes.default_workers(analysis_workers.ANALYSIS_POOL) == analysis_workers.MAX_WORKERS == 8
    assert (grading_pool.GRADING_POOL.env, analysis_workers.ANALYSIS_POOL.env) == (grading_pool.WORKERS_ENV,
                                                                                  analysis_workers.WORKERS_ENV)


def test_a_count_past_the_limit_is_refused_for_both_pools_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit's ``PR1_ANALYSIS_WORKERS=99999`` forked 5,450 processes; the limit is four per CPU
    of the machine, never under 16 (here 64 CPUs: 256 is the last count allowed)."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    for env, sized in ((grading_pool.WORKERS_ENV, lambda: processes.default_workers(grading_pool.GRADING_POOL)),
                       (analysis_workers.WORKERS_ENV, lambda: processes.default_workers(analysis_workers.ANALYSIS_POOL))):
        monkeypatch.setenv(env, "256")
        assert sized() == 256
        for value in ("257", "99999"):
            monkeypatch.setenv(env, value)
            with pytest.raises(Pr1EvalError, match=rf"^\${env} is {value}: ask for 1 to 256 .*4 per CPU"):
                sized()
        monkeypatch.delenv(env)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert processes.worker_limit() == 16  # the floor
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert processes.worker_limit() == 16


def test_an_explicit_size_past_the_limit_forks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.raises(Pr1EvalError, match="size is 17: ask for 1 to 16 analysis"), \
            analysis_workers.analysis_workers(17):
        pytest.fail("no pool is made")
