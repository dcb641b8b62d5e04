"""A module a registry test imports lazily (it must not be imported before the lookup)."""

VALUE = "the lazy value"
