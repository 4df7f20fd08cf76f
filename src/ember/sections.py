"""A feature's own settings: a section of the one configuration, read like the rest.

A feature that declares ``Feature.settings`` (a pydantic model) gets it from the same sources,
with the same precedence and the same errors as every other setting:

- in the TOML file, a table named after the feature: ``[hello]`` then ``greeting = "hi"``;
- in the environment, ``EMBER_<FEATURE>_<FIELD>``: ``EMBER_HELLO_GREETING=hi``.

ember's own features keep the names users already type (README's Configuration table): their
sections are *flat* (``Feature.flat_settings``), each field a top-level key of the file and
``EMBER_<FIELD>`` (``traffic_learning``, ``EMBER_TRAFFIC_LEARNING``), owned by one feature.

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

    def key(self, name: str, field: str) -> str:
        """How ``field`` is named where it was written (``origin``): ``traffic_learning``
        for a flat section, ``hello.greeting`` for a table."""
        return field if self.flat else f"{name}.{field}"


#: The sections, by feature name.
Models = Mapping[str, Section]


def models(features: Iterable[Registered], core: Collection[str] = ()) -> dict[str, Section]:
    """The sections of ``features`` that declare settings (``ember.compose`` hands the
    registered ones). ``FeatureError`` when a top-level key would have two owners (``core``:
    the kernel's settings): a flat field another feature or the kernel has too, or an installed
    feature named like a setting (its ``[name]`` table would be that setting)."""
    owner = dict.fromkeys(core, "the kernel")
    out: dict[str, Section] = {}
    for found in features:
        f = found.feature
        if f.settings is None:
            continue
        if f.flat_settings:
            for key in f.settings.model_fields:
                if key in owner:
                    raise FeatureError(f"setting {key!r} of {f.name!r} is {owner[key]}'s too")
                owner[key] = f.name
        elif f.name in owner:
            raise FeatureError(
                f"feature {found.reference!r} is named {f.name!r}, like a setting: its "
                f"section [{f.name}] would be that setting; rename it"
            )
        out[f.name] = Section(f.settings, f.flat_settings)
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
    """``EMBER_HELLO_GREETING -> ("hello", "greeting")`` for every field of every section
    (``EMBER_TRAFFIC_LEARNING -> ("traffic", "traffic_learning")`` for a flat one)."""
    out: dict[str, tuple[str, str]] = {}
    for name, section in sections.items():
        for field in section.model.model_fields:
            head = "" if section.flat else f"{name.upper()}_"
            out[f"{prefix}{head}{field.upper()}"] = (name, field)
    return out


def suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    return f" Did you mean {close[0]}?" if close else ""


def from_file(data: Mapping[str, Any], sections: Models, file: str) -> dict[str, dict[str, Any]]:
    """Each section's values in the file (a flat one's top-level keys, else its table);
    ``ConfigError`` for a key of a table that no field has."""
    out: dict[str, dict[str, Any]] = {}
    for name, section in sections.items():
        model = section.model
        if section.flat:
            given = {k: v for k, v in data.items() if k in model.model_fields}
            if given:
                out[name] = given
            continue
        table = data.get(name)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise ConfigError(f"{file}: {name}", f"must be a table ([{name}]), not a value")
        for key in table:
            if key not in model.model_fields:
                known = sorted(model.model_fields)
                raise ConfigError(
                    f"{file}: {name}.{key}",
                    "unknown key." + suggest(key, known) + " Remove it or fix the spelling.",
                )
        out[name] = dict(table)
    return out


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
            if "input" in err and not isinstance(err["input"], dict):
                problem += f"; got {err['input']!r}"
            raise ConfigError(origin.get(key, key), problem) from exc
    return out
