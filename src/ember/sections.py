"""A feature's own settings: a section of the one configuration, read like the rest.

A feature that declares ``Feature.settings`` (a pydantic model) gets it from the same sources,
with the same precedence and the same errors as every other setting:

- in the TOML file, a table named after the feature: ``[hello]`` then ``greeting = "hi"``;
- in the environment, ``EMBER_<FEATURE>__<FIELD>`` (``EMBER_HELLO__GREETING=hi``), or
  ``EMBER_<FEATURE>_<FIELD>`` (``EMBER_HELLO_GREETING=hi``).

ember's own features keep the names users already type (README's Configuration table): their
sections are *flat* (``Feature.flat_settings``), each field also a top-level key of the file and
``EMBER_<FIELD>`` (``traffic_learning``, ``EMBER_TRAFFIC_LEARNING``), owned by one feature. Their
grouped name, in the table and in ``EMBER_<FEATURE>__<NAME>``, is the field's without the
feature's name and ``_`` in front (``memory_mode`` is ``[memory] mode``,
``EMBER_MEMORY__MODE``); a field that does not start with them keeps its name (``light_model``
is ``[shadow] light_model``; the switch ``shadow`` is ``[shadow] shadow``).

One setting written both ways in one place (the file, or the environment) stops start-up with
a message naming both: which one was meant cannot be guessed. Between places the usual
precedence holds whatever the form (``EMBER_MEMORY__MODE`` beats the file's ``memory_mode``).

An unknown key in a section, or an ``EMBER_*`` variable that names nothing, stops start-up with
a message naming where it was written and the closest known name; a bad value names the key
too. A stage reads its section with ``settings.section("hello")``: the feature's model, with
its defaults when nothing was set.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from ember.errors import ConfigError, FeatureError

if TYPE_CHECKING:
    from ember.features import Registered


@dataclass(frozen=True)
class Section:
    """A feature's settings: its model, and whether its fields are top-level keys."""

    model: type[BaseModel]
    flat: bool = False
    #: the feature's name (its table, and the head of its grouped variables)
    name: str = ""

    def key(self, name: str, field: str) -> str:
        """How ``field`` is named where it was written (``origin``): ``traffic_learning``
        for a flat section, ``hello.greeting`` for a table."""
        return field if self.flat else f"{name}.{field}"

    def grouped(self, field: str) -> str:
        """``field``'s name in the feature's table and ``EMBER_<FEATURE>__<NAME>``: a flat
        field without ``<feature>_`` in front (``memory_mode`` -> ``mode``), any other as
        it is (``light_model``, ``shadow``, a table-only section's ``greeting``)."""
        head = f"{self.name}_"
        if self.flat and field.startswith(head) and len(field) > len(head):
            return field[len(head) :]
        return field

    @property
    def fields(self) -> dict[str, str]:
        """``grouped name -> field`` of every field."""
        return {self.grouped(field): field for field in self.model.model_fields}


#: The sections, by feature name.
Models = Mapping[str, Section]


def models(features: Iterable[Registered], core: Collection[str] = ()) -> dict[str, Section]:
    """The sections of ``features`` that declare settings (``ember.compose`` hands the
    registered ones). ``FeatureError`` when a top-level key would have two owners (``core``:
    the kernel's settings): a flat field another feature or the kernel has too, or a feature
    named like another's setting (its ``[name]`` table would be that setting); or when two
    fields of one section would have the same grouped name."""
    features = tuple(features)
    owner = dict.fromkeys(core, "the kernel")
    out: dict[str, Section] = {}
    for found in features:
        f = found.feature
        if f.settings is None:
            continue
        section = Section(f.settings, f.flat_settings, f.name)
        if len(section.fields) != len(f.settings.model_fields):
            raise FeatureError(
                f"two settings of {f.name!r} have one name in its [{f.name}] table; rename one"
            )
        if f.flat_settings:
            for key in f.settings.model_fields:
                if key in owner:
                    raise FeatureError(f"setting {key!r} of {f.name!r} is {owner[key]}'s too")
                owner[key] = f.name
        out[f.name] = section
    for found in features:
        f = found.feature
        if f.name in out and owner.get(f.name, f.name) != f.name:
            raise FeatureError(
                f"feature {found.reference!r} is named {f.name!r}, like a setting: its "
                f"section [{f.name}] would be that setting; rename it"
            )
    return out


def flat_fields(sections: Models) -> dict[str, str]:
    """``field -> feature`` of every flat section."""
    return {
        field: name
        for name, section in sections.items()
        if section.flat
        for field in section.model.model_fields
    }


def env_names(sections: Models, prefix: str) -> dict[str, tuple[str, str]]:
    """``EMBER_HELLO__GREETING`` and ``EMBER_HELLO_GREETING -> ("hello", "greeting")`` for
    every field of every section; for a flat one, ``EMBER_MEMORY__MODE`` and
    ``EMBER_MEMORY_MODE -> ("memory", "memory_mode")``."""
    out: dict[str, tuple[str, str]] = {}
    for name, section in sections.items():
        for grouped, field in section.fields.items():
            head = "" if section.flat else f"{name.upper()}_"
            out[f"{prefix}{head}{field.upper()}"] = (name, field)
            out[f"{prefix}{name.upper()}__{grouped.upper()}"] = (name, field)
    return out


def suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f" Did you mean {close[0]}?" if close else ""


def from_file(
    data: Mapping[str, Any], sections: Models, file: str
) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Each section's values in the file (a flat one's top-level keys, and its table), and
    where each was written (``origin``: ``"memory_mode" -> "config.toml: memory.mode"``);
    ``ConfigError`` for a key of a table that no field has, and for one setting written both
    as a top-level key and in its table."""
    out: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    for name, section in sections.items():
        given: dict[str, Any] = {}
        if section.flat:
            for field in section.model.model_fields:
                if field in data and not (field == name and isinstance(data[field], dict)):
                    given[field] = data[field]
                    origin[section.key(name, field)] = f"{file}: {field}"
        for key, value in _table(data, name, section, file).items():
            field = section.fields[key]
            written = f"{file}: {name}.{key}"
            if field in given:
                raise ConfigError(
                    written, f"the same setting as {field}, which this file sets too; keep one"
                )
            given[field] = value
            origin[section.key(name, field)] = written
        if given:
            out[name] = given
    return out, origin


def _table(data: Mapping[str, Any], name: str, section: Section, file: str) -> dict[str, Any]:
    """The ``[name]`` table of ``data`` (empty when absent); ``ConfigError`` for a value in
    its place (a flat field named like its feature, ``compress = "on"``, is that field) or a
    key no field has."""
    table = data.get(name)
    if table is None or (
        section.flat and name in section.model.model_fields and not isinstance(table, dict)
    ):
        return {}
    if not isinstance(table, dict):
        raise ConfigError(f"{file}: {name}", f"must be a table ([{name}]), not a value")
    for key in table:
        if key not in section.fields:
            if key in section.model.model_fields:  # [memory] memory_mode
                hint = f" In [{name}] it is {section.grouped(key)} (or {key} at the top level)."
            else:
                hint = suggest(key, sorted(section.fields))
            raise ConfigError(
                f"{file}: {name}.{key}",
                "unknown key." + hint + " Remove it or fix the spelling.",
            )
    return dict(table)


def validated(
    sections: Models, values: Mapping[str, Mapping[str, Any]], origin: Mapping[str, str]
) -> dict[str, BaseModel]:
    """Every section's model from ``values`` (defaults for what is unset); a bad value is a
    ``ConfigError`` naming where it was written (``origin``: ``"hello.greeting" -> place``)."""
    out: dict[str, BaseModel] = {}
    for name, section in sections.items():
        given = values.get(name, {})
        try:
            out[name] = section.model(**given)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else ""
            key = section.key(name, field) if field else name
            problem = err["msg"]
            secret = field in section.model.model_fields and not _shown(section, field)
            if "input" in err and not isinstance(err["input"], dict) and not secret:
                problem += f"; got {err['input']!r}"
            raise ConfigError(origin.get(key, key), problem) from exc
    return out


def _shown(section: Section, field: str) -> bool:
    """Whether ``field``'s value may be echoed in an error: not a secret's (a field with
    ``repr=False``: a token, an API key), which would land in a terminal or a log."""
    return section.model.model_fields[field].repr
