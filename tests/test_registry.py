"""The one registry: ordered, typed name -> item tables with lazy entries and clear refusals."""

from __future__ import annotations

import sys

import pytest

from trainops._errors import ConfigError
from trainops._registry import Registry


def test_names_keep_registration_order_and_read_as_a_mapping() -> None:
    table: Registry[int] = Registry("number")
    table.register("two", 2)
    table.register("one", 1)
    assert table.names() == ("two", "one")
    assert list(table) == ["two", "one"] and len(table) == 2
    assert table["one"] == 1 and table.lookup("two") == 2
    assert dict(table) == {"two": 2, "one": 1}
    assert "one" in table and "three" not in table


def test_register_as_a_decorator_returns_the_item() -> None:
    table: Registry[type[object]] = Registry("kind")

    @table.register("thing")
    class Thing:
        pass

    assert table.lookup("thing") is Thing


def test_an_unknown_name_is_the_seams_error_listing_the_known_ones() -> None:
    table: Registry[int] = Registry("backend", error=ConfigError, shown=lambda n: f"{n}://")
    table.register("local", 1)
    table.register("ray", 2)
    with pytest.raises(
        ConfigError, match=r"^job 'a': unknown backend 'slurm' \(known: local://, ray://\)$"
    ):
        table.lookup("slurm", where="job 'a': ")
    with pytest.raises(KeyError):
        table["slurm"]
    assert table.get("slurm") is None


def test_registering_a_name_twice_is_refused_unless_the_same_item_or_replace() -> None:
    table: Registry[object] = Registry("service")
    item = object()
    table.register("a", item)
    table.register("a", item)  # the same module imported twice
    with pytest.raises(ValueError, match="service 'a' is registered already"):
        table.register("a", object())
    other = object()
    table.register("a", other, replace=True)
    assert table["a"] is other


@pytest.mark.parametrize("name", ["", " a", "a "])
def test_a_blank_or_padded_name_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="names must be non-empty"):
        Registry[int]("format").register(name, 1)


def test_a_lazy_entry_is_listed_but_imported_only_when_looked_up() -> None:
    module = "tests._registry_lazy_target"
    sys.modules.pop(module, None)
    table: Registry[object] = Registry("store")
    table.register_lazy("lazy", f"{module}:VALUE")
    assert table.names() == ("lazy",) and "lazy" in table
    assert module not in sys.modules
    assert table.lookup("lazy") == "the lazy value"
    assert module in sys.modules
    assert table.target("lazy") == f"{module}:VALUE"
    table.register_lazy("lazy", f"{module}:VALUE")  # the registering module imported again
    with pytest.raises(ValueError, match="registered already"):
        table.register_lazy("lazy", f"{module}:OTHER")


def test_a_lazy_entry_whose_extra_is_missing_says_what_to_install() -> None:
    table: Registry[object] = Registry("backend", error=ConfigError)
    table.register_lazy("gone", "trainops_no_such_extra.module:Thing")
    with pytest.raises(ConfigError, match=r"backend 'gone' needs trainops_no_such_extra"):
        table.lookup("gone")
    table.register_lazy("broken", "trainops._registry:NoSuchName")
    with pytest.raises(ConfigError, match=r"names nothing"):
        table.lookup("broken")
    table.register_lazy("moved", "trainops._no_such_module:Thing")
    with pytest.raises(
        ConfigError, match=r"^backend 'moved': trainops._no_such_module:Thing cannot be imported"
    ):
        table.lookup("moved")


@pytest.mark.parametrize("target", ["nomodule", "a.b", "a:b:c", "a b:c", ":c", "a:"])
def test_a_malformed_lazy_target_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match=r"is not 'package\.module:attr'"):
        Registry[int]("rule").register_lazy("x", target)


def test_added_registers_for_a_block_only_and_unregister_removes() -> None:
    table: Registry[int] = Registry("launcher")
    with table.added("throwaway", 7) as item:
        assert item == 7 and table.names() == ("throwaway",)
    assert table.names() == ()
    table.register("x", 1)
    table.unregister("x")
    with pytest.raises(LookupError, match=r"unknown launcher 'x' \(known: none\)"):
        table.unregister("x")


def test_added_with_replace_puts_the_old_entry_back() -> None:
    table: Registry[int] = Registry("launcher")
    table.register("mpi", 1)
    table.register("plain", 3)
    with table.added("mpi", 2, replace=True):
        assert table["mpi"] == 2 and table.names() == ("mpi", "plain")
    # back in its place: for sidecars the order is the start order
    assert table["mpi"] == 1 and table.names() == ("mpi", "plain")


def test_a_hostile_name_is_escaped_and_cut_in_the_refusal() -> None:
    table: Registry[int] = Registry("pack format", error=ValueError)
    table.register("shards", 1)
    with pytest.raises(
        ValueError, match=r"^unknown pack format '\\x1b\[31m\\n' \(known: shards\)$"
    ):
        table.lookup("\x1b[31m\n")
    with pytest.raises(ValueError) as refused:
        table.lookup("x" * 1_000_000)
    message = str(refused.value)
    assert len(message) < 200 and "(1000000 characters)" in message and "\n" not in message


def test_added_over_a_resolved_lazy_entry_keeps_its_target() -> None:
    table: Registry[object] = Registry("store")
    table.register_lazy("lazy", "tests._registry_lazy_target:VALUE")
    table.lookup("lazy")
    with table.added("lazy", "swapped", replace=True):
        assert table.target("lazy") is None
    assert table.target("lazy") == "tests._registry_lazy_target:VALUE"
