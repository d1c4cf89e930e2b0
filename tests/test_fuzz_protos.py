"""Malformed protobuf bytes into every proto reader: only xlashape's errors.

A small, fixed run of ``fuzz/fuzz_protos.py`` (which runs 100,000 inputs in
child processes): mutated real protos of the test data, random bytes and
well-formed messages with odd field values go to ``read_hlo_proto``,
``read_buffer_assignment``, ``read_memory_usage_report``,
``read_hlo_proto_module``, ``Shape.from_proto``, ``Layout.from_proto`` and
``ProgramShape.from_proto``; each must return or raise an ``XlaShapeError``.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fuzz"))

import fuzz_protos  # noqa: E402

N = int(os.environ.get("XLASHAPE_PROTO_FUZZ", "1500"))


@pytest.mark.parametrize("seed", [0, 1])
def test_malformed_protos_raise_only_the_error_family(seed):
    failures = []
    for k, (_kind, data) in enumerate(fuzz_protos.inputs(N, 1000 + seed)):
        for name, err in fuzz_protos.check(data):
            failures.append((k, name, err, data[:80].hex()))
    assert failures == []


def test_the_inputs_are_not_all_rejected_early():
    # the mutations must leave some inputs readable, else the later checks
    # (shapes, ids, instruction use) would go untested
    from xlashape import Shape, hlo_proto
    from xlashape.errors import XlaShapeError

    read = {"module": 0, "shape": 0}
    for _kind, data in fuzz_protos.inputs(600, 7):
        for key, fn in (("module", hlo_proto.read_hlo_proto_module), ("shape", Shape.from_proto)):
            try:
                fn(data)
                read[key] += 1
            except XlaShapeError:
                pass
    assert read["module"] > 10 and read["shape"] > 30
