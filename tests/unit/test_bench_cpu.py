"""The benchmark's CPU accounting: the window opens after the warm-up, and stage CPU is given
only when no two stage spans were open at once."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider

from memsvc.bench.cpu import ServerCpu, ThreadCpu, group_of


def burn(iterations: int = 20_000) -> int:
    return sum(i * i for i in range(iterations))


def test_stages_after_the_warm_up_add_up_when_they_run_one_after_another() -> None:
    cpu = ServerCpu()
    tracer = TracerProvider()
    tracer.add_span_processor(cpu)
    t = tracer.get_tracer("test")
    cpu.open_after(1)
    with t.start_as_current_span("memsvc.v1.QueryService/Query"), t.start_as_current_span("memsvc.stage.embed"):
        burn(200_000)  # the warm-up
    for _ in range(2):
        with t.start_as_current_span("memsvc.v1.QueryService/Query"):
            with t.start_as_current_span("memsvc.stage.embed"):
                burn()
            with t.start_as_current_span("memsvc.stage.rank"):
                burn()
    got = cpu.close()
    assert got.queries == 2
    assert set(got.stages) == {"embed", "rank"}
    assert 0 < sum(got.stages.values()) <= got.seconds


def test_overlapping_stages_give_no_stage_figures() -> None:
    cpu = ServerCpu()
    tracer = TracerProvider()
    tracer.add_span_processor(cpu)
    t = tracer.get_tracer("test")
    cpu.open_after(0)
    with t.start_as_current_span("memsvc.v1.QueryService/Query"):
        outer = t.start_span("memsvc.stage.embed")
        with t.start_as_current_span("memsvc.stage.recall"):
            burn()
        outer.end()
    got = cpu.close()
    assert got.queries == 1 and got.stages == {} and got.seconds > 0


def test_thread_groups_follow_the_pools_names() -> None:
    assert group_of("sqlite_0") == "record store" and group_of("embed-lane_1") == "embedder"
    assert group_of(None).startswith("native") and group_of("Thread-7") == "other Python threads"
    before = ThreadCpu.now()
    burn(2_000_000)  # about 0.1 s, ten clock ticks, on this (the main) thread
    assert ThreadCpu.now().since(before)["other Python threads"] >= 0.03
