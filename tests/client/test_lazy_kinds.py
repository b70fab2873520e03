"""A device imports only what it uses (issue 45, Build 5): ``import
shoal.client.device`` loads no pydantic, scipy, server, shuffler, deploy,
HTTP or JSON-schema package and no round kind's module; joining a round of
one kind then loads that kind's two modules (device half, config), no other
kind's device half, and of the other kinds' configs only those its config
is built on (``BUILT_ON``). A test of the module set, in a fresh
interpreter, not of time."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from shoal.client.kinds import _DEVICE_KINDS, DEVICE_KINDS, device_kind
from shoal.common.errors import ConfigError
from shoal.common.kinds import _MODULES, config_kinds, dump_config, kind_name

NEVER = ("pydantic", "scipy", "sklearn", "matplotlib", "pandas", "fastapi", "starlette", "uvicorn", "httpx",
         "requests", "urllib3", "jsonschema", "shoal.server", "shoal.shuffler", "shoal.deploy")
ALL_KINDS = {"tree", "sketch", "refine", "central", "partition", "local_refine", "continual", "elbow"}
# kind -> the other kinds whose config module its config module imports (derivation shared at module
# level: kinds/tree.py's models, epsilon cap and derive_config; kinds/refine.py's; kinds/central.py's)
BUILT_ON = {"tree": set(), "central": set(), "sketch": {"tree"}, "refine": {"tree"},
            "partition": {"refine", "tree"}, "local_refine": {"refine", "tree"}, "elbow": {"refine", "tree"},
            "continual": {"central"}}


def _kind_modules() -> dict[str, set[str]]:
    """Each kind's own modules: its device half and its config module."""
    return {name: {_DEVICE_KINDS[name].partition(":")[0], _MODULES[name]} for name in ALL_KINDS}


def _child(code: str, stdin: str = "") -> dict:
    out = subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


_IMPORT = """
import json, sys
import shoal.client.device
from shoal.client.device import Device
from shoal import PublicBound  # the package top still lends its public names (loaded on use)
from shoal.client.kinds import DEVICE_KINDS
names = sorted(DEVICE_KINDS)
print(json.dumps({"modules": sorted(sys.modules), "names": names}))
"""


def test_importing_the_device_loads_no_service_no_heavy_library_and_no_kind():
    got = _child(_IMPORT)
    loaded = set(got["modules"])
    assert sorted(m for m in loaded if m.split(".")[0] in NEVER or m.startswith(NEVER)) == []
    assert loaded & set().union(*_kind_modules().values()) == set()
    assert set(got["names"]) == ALL_KINDS  # every kind is listed, none imported to list it


_JOIN = """
import json, sys
import numpy as np
from shoal.client.device import Device
request = json.loads(sys.stdin.read())
before = set(sys.modules)
device = Device("http://127.0.0.1:1", request["ledger"])
spend, make = device._plan(request["round_id"], request["config"], b"\\1" * 32, "0" * 64,
                           np.full(request["config"]["dim"], 0.1))  # what Device.participate does once it has the config
make()
print(json.dumps({"new": sorted(set(sys.modules) - before)}))
"""


@pytest.mark.parametrize("name", ["tree", "sketch"])
def test_joining_a_round_loads_that_kind_and_no_other(name, tmp_path):
    from shoal.common.bounds import PublicBound
    from shoal.common.kinds.sketch import derive_sketch_round
    from shoal.common.kinds.tree import derive_config

    config = {"tree": lambda: derive_config(10_000, 3, 4, 4.0, round_id="r"),
              "sketch": lambda: derive_sketch_round(10_000, 3, 4, 1.0, bound=PublicBound(radius=1.0), seed=7,
                                                    round_id="r")}[name]()
    request = {"ledger": str(tmp_path / "ledger.json"), "round_id": "r", "config": dump_config(name, config)}
    new = set(_child(_JOIN, json.dumps(request))["new"])
    kinds = _kind_modules()
    assert kinds[name] <= new
    assert new & set().union(*(m for k, m in kinds.items() if k != name)) == {_MODULES[k] for k in BUILT_ON[name]}
    assert sorted(m for m in new if m.split(".")[0] in NEVER or m.startswith(NEVER)) == []


_LOOK_UP = """
import json, sys
import shoal.client.device
from shoal.client.kinds import device_kind
from shoal.common.kinds import config_kinds
before = set(sys.modules)
device_kind(sys.argv[1]), config_kinds()[sys.argv[1]]
print(json.dumps({"new": sorted(set(sys.modules) - before)}))
"""


@pytest.mark.parametrize("name", sorted(ALL_KINDS))
def test_looking_up_a_kind_loads_its_modules_and_only_the_configs_it_is_built_on(name):
    out = subprocess.run([sys.executable, "-c", _LOOK_UP, name], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    new = set(json.loads(out.stdout)["new"])
    kinds = _kind_modules()
    assert kinds[name] <= new
    assert new & set().union(*(m for k, m in kinds.items() if k != name)) == {_MODULES[k] for k in BUILT_ON[name]}
    assert sorted(m for m in new if m.split(".")[0] in NEVER or m.startswith(NEVER)) == []


def test_the_lazy_registries_list_every_kind_refuse_unknown_ones_and_agree_on_names():
    assert set(DEVICE_KINDS) == set(config_kinds()) == ALL_KINDS
    assert "tree" in DEVICE_KINDS and "kmeans" not in DEVICE_KINDS and len(DEVICE_KINDS) == 8
    with pytest.raises(ConfigError, match="cannot take part in 'kmeans' rounds"):
        device_kind("kmeans")
    with pytest.raises(ConfigError, match="unknown round kind 'kmeans'"):
        kind_name({"kind": "kmeans", "protocol": 1})
    with pytest.raises(KeyError):
        DEVICE_KINDS["kmeans"]
    for name in ALL_KINDS:  # each loaded kind is the one its table entry names
        assert device_kind(name).name == config_kinds()[name].name == name
