#!/usr/bin/env python3
"""Validate OCSF events (JSON Lines) against the OCSF schema source.

usage: ocsf_validate.py [--schema DIR] [--version V] FILE...

Loads the schema the way the OCSF server compiles it (ocsf/ocsf-server,
lib/schema/json_reader.ex and cache.ex): classes from events/**/*.json with
their `extends` chains and `$include`s (includes/, profiles/), objects from
objects/*.json likewise, every attribute completed from dictionary.json (type,
enum, sibling, is_array), enums merged key by key (the class's or object's own
values added to the dictionary's). Attributes that come from a profile file
carry that profile and are allowed only when the event lists the profile in
`metadata.profiles`; a class can clear that mark (`"profile": null`). Every
timestamp_t attribute gets a `<name>_dt` twin from the datetime profile.

Each record is checked: the class exists; category_uid and type_uid agree
with it; required attributes are present, recursively in objects; no
attribute outside the class or object (except inside free-form objects such
as `unmapped`); value types, string regexes and lengths, number ranges; enum
values; the caption siblings (activity_name, severity, status, class_name,
category_name, type_name...) equal their enum's caption (free for 99 Other);
object constraints (at_least_one, just_one); metadata.version is the schema's
version. Every violation is printed as FILE:LINE: PATH: message; the exit
status is 1 when there is any, 2 when the input or the schema cannot be read.

Python 3 standard library only.
"""
import argparse
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCHEMA = os.path.join(HERE, "..", "vectors", "ocsf")

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)


def deep_merge(left, right):
    """The OCSF server's Utils.deep_merge: right wins, maps merge recursively,
    an empty map on either side yields the other."""
    if not isinstance(left, dict) or not isinstance(right, dict):
        return right
    if not left:
        return right
    if not right:
        return left
    out = dict(left)
    for k, v in right.items():
        if k in out and isinstance(out[k], dict) and isinstance(v, dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


class Schema:
    def __init__(self, home):
        self.home = home
        self.cache = {}
        self.version = self.read("version.json")["version"]
        dic = self.read("dictionary.json")
        self.types = dic["types"]["attributes"]
        self.dictionary = {}
        for name, a in dic["attributes"].items():
            a = dict(a)
            t = a.get("type") or "object_t"
            if t not in self.types:
                a["type"], a["object_type"] = "object_t", t
            self.dictionary[name] = a
        self.categories = self.read("categories.json")["attributes"]
        self.profiles = {"datetime"}
        for f in sorted(os.listdir(os.path.join(home, "profiles"))):
            if f.endswith(".json"):
                self.profiles.add(self.read(os.path.join("profiles", f))["name"])
        self.objects = self.load_tree("objects")
        for name in list(self.objects):
            self.objects[name] = self.resolve_extends(self.objects, name, set())
        for obj in self.objects.values():
            self.complete(obj)
        raw = self.load_tree("events")
        self.classes = {}
        for name, c in raw.items():
            if "uid" not in c and name != "base_event":
                continue  # hidden: a category's base class
            own_uid = c.get("uid", 0)
            c = self.resolve_extends(raw, name, set())
            cat = c.get("category")
            if cat == "other" or cat is None:
                cat_uid, cat_caption = 0, None
            else:
                if cat not in self.categories:
                    raise SystemExit(f"schema: class {name}: unknown category {cat}")
                cat_uid = self.categories[cat]["uid"]
                cat_caption = self.categories[cat]["caption"]
            uid = cat_uid * 1000 + own_uid
            self.complete(c)
            at = c["attributes"]
            at["class_uid"]["enum"] = {str(uid): {"caption": c["caption"]}}
            if cat_caption is not None:
                at["category_uid"]["enum"] = {str(cat_uid): {"caption": cat_caption}}
            acts = at.get("activity_id", {}).get("enum", {})
            at["type_uid"]["enum"] = {
                str(uid * 100 + int(k)): {"caption": f"{c['caption']}: {v['caption']}"}
                for k, v in acts.items()
            }
            at["type_uid"]["enum"].setdefault(
                str(uid * 100), {"caption": f"{c['caption']}: Unknown"}
            )
            c["uid"], c["category_uid"] = uid, cat_uid
            self.classes[uid] = c

    def read(self, rel):
        path = os.path.join(self.home, rel)
        if path not in self.cache:
            with open(path, encoding="utf-8") as f:
                self.cache[path] = json.load(f)
        return self.cache[path]

    def included(self, rel):
        """An $include'd file's attributes: marked with the profile when the
        file is a profile, its annotations as defaults."""
        data = self.read(rel)
        profile = data.get("name") if data.get("meta") == "profile" else None
        ann = data.get("annotations") or {}
        out = {}
        for name, a in (data.get("attributes") or {}).items():
            a = dict(a)
            if profile is not None:
                a["profile"] = profile
            out[name] = deep_merge(ann, a) if ann else a
        return out

    def resolve_includes(self, data):
        attrs = dict(data.get("attributes") or {})
        inc = attrs.pop("$include", None)
        if isinstance(inc, str):
            inc = [inc]
        for rel in inc or []:
            attrs = deep_merge(self.included(rel), attrs)
        for name, a in list(attrs.items()):
            if isinstance(a, dict) and "$include" in a:
                a = dict(a)
                rel = a.pop("$include")
                attrs[name] = deep_merge(self.read(rel), a)
        data = dict(data)
        data["attributes"] = attrs
        return data

    def load_tree(self, sub):
        out = {}
        for root, _dirs, files in os.walk(os.path.join(self.home, sub)):
            for f in sorted(files):
                if f.endswith(".json"):
                    rel = os.path.relpath(os.path.join(root, f), self.home)
                    d = self.resolve_includes(self.read(rel))
                    out[d["name"]] = d
        return out

    def resolve_extends(self, items, name, seen):
        item = items[name]
        base_name = item.get("extends")
        if base_name is None:
            return dict(item)
        if base_name in seen or base_name not in items:
            raise SystemExit(f"schema: {name} extends {base_name}: not found or circular")
        base = self.resolve_extends(items, base_name, seen | {name})
        attrs = deep_merge(base.get("attributes") or {}, item.get("attributes") or {})
        attrs = {k: v for k, v in attrs.items() if v is not None}
        out = dict(base)
        out.update(item)
        out["profiles"] = list(
            dict.fromkeys((base.get("profiles") or []) + (item.get("profiles") or []))
        )
        out["attributes"] = attrs
        return out

    def complete(self, entity):
        attrs = {}
        for name, a in entity["attributes"].items():
            base = self.dictionary.get(name)
            if base is None:
                raise SystemExit(f"schema: {entity['name']}.{name}: not in the dictionary")
            a = deep_merge(base, a)
            a.setdefault("requirement", "optional")
            attrs[name] = a
        for name, a in list(attrs.items()):
            if a.get("type") == "timestamp_t" and name + "_dt" not in attrs:
                attrs[name + "_dt"] = {
                    "type": "datetime_t",
                    "requirement": "optional",
                    "profile": "datetime",
                }
        entity["attributes"] = attrs


class Validator:
    def __init__(self, schema, version):
        self.s = schema
        self.version = version
        self.errors = []

    def err(self, path, msg):
        self.errors.append((path or "(record)", msg))

    def event(self, ev):
        self.errors = []
        if not isinstance(ev, dict):
            self.err(None, "not a JSON object")
            return self.errors
        uid = ev.get("class_uid")
        if not isinstance(uid, int) or isinstance(uid, bool):
            self.err("class_uid", "missing or not an integer")
            return self.errors
        cls = self.s.classes.get(uid)
        if cls is None:
            self.err("class_uid", f"no OCSF {self.s.version} class has uid {uid}")
            return self.errors
        profiles = self.profiles(ev)
        self.attributes(ev, None, cls, f"class {cls['name']} ({uid})", profiles)
        self.constraints(ev, None, cls, f"class {cls['name']}")
        if ev.get("category_uid") != cls["category_uid"]:
            self.err("category_uid", f"is {ev.get('category_uid')!r}, class {uid} is in category {cls['category_uid']}")
        act = ev.get("activity_id")
        if isinstance(act, int) and ev.get("type_uid") != uid * 100 + act:
            self.err("type_uid", f"is {ev.get('type_uid')!r}, class_uid × 100 + activity_id is {uid * 100 + act}")
        md = ev.get("metadata")
        if isinstance(md, dict) and md.get("version") != self.version:
            self.err("metadata.version", f"is {md.get('version')!r}, the schema is {self.version!r}")
        return self.errors

    def profiles(self, ev):
        md = ev.get("metadata")
        p = md.get("profiles") if isinstance(md, dict) else None
        if not isinstance(p, list):
            return set()
        for i, name in enumerate(p):
            if isinstance(name, str) and name not in self.s.profiles:
                self.err(f"metadata.profiles[{i}]", f"no OCSF profile is named {name!r}")
        return {x for x in p if isinstance(x, str)}

    def attributes(self, item, parent, entity, what, profiles):
        defs = entity["attributes"]
        path = lambda k: k if parent is None else f"{parent}.{k}"  # noqa: E731
        if not defs:
            return  # free-form ("object": unmapped, xattributes)
        for key in item:
            a = defs.get(key)
            if a is None:
                self.err(path(key), f"not an attribute of {what}")
            elif a.get("profile") and a["profile"] not in profiles:
                self.err(
                    path(key),
                    f"comes from the {a['profile']} profile, which metadata.profiles does not declare",
                )
        for key, a in defs.items():
            if a.get("profile") and a["profile"] not in profiles:
                continue
            v = item.get(key)
            if v is None:
                if a.get("requirement") == "required":
                    self.err(path(key), f"required by {what}, missing")
                continue
            if a.get("is_array"):
                if not isinstance(v, list):
                    self.err(path(key), f"must be an array of {a.get('object_type') or a['type']}")
                    continue
                for i, e in enumerate(v):
                    self.value(e, f"{path(key)}[{i}]", a, profiles)
            else:
                self.value(v, path(key), a, profiles)
            self.enum(item, key, a, parent, v)

    def enum(self, item, key, a, parent, v):
        enum = a.get("enum")
        if not enum:
            return
        p = key if parent is None else f"{parent}.{key}"
        for i, e in enumerate(v if a.get("is_array") else [v]):
            ep = f"{p}[{i}]" if a.get("is_array") else p
            if isinstance(e, bool) or str(e) not in enum:
                self.err(ep, f"{e!r} is not one of the enum's values {sorted(enum, key=lambda x: (len(x), x))}")
                continue
            sib = a.get("sibling")
            if sib and not a.get("is_array") and sib in item and e != 99:
                cap = enum[str(e)].get("caption")
                if item[sib] != cap:
                    sp = sib if parent is None else f"{parent}.{sib}"
                    self.err(sp, f"is {item[sib]!r}, the caption of {p} {e} is {cap!r}")

    def value(self, v, path, a, profiles):
        t = a["type"]
        if t == "object_t":
            ot = a["object_type"]
            obj = self.s.objects.get(ot)
            if obj is None:
                self.err(path, f"schema has no object {ot}")
            elif not isinstance(v, dict):
                self.err(path, f"must be an object ({ot})")
            else:
                self.attributes(v, path, obj, f"object {ot}", profiles)
                self.constraints(v, path, obj, f"object {ot}")
            return
        td = self.s.types.get(t)
        if td is None:
            self.err(path, f"schema has no type {t}")
            return
        prim = td.get("type", t)
        ok = {
            "boolean_t": lambda x: isinstance(x, bool),
            "integer_t": lambda x: isinstance(x, int) and not isinstance(x, bool) and INT32[0] <= x <= INT32[1],
            "long_t": lambda x: isinstance(x, int) and not isinstance(x, bool) and INT64[0] <= x <= INT64[1],
            "float_t": lambda x: isinstance(x, float),
            "string_t": lambda x: isinstance(x, str),
            "json_t": lambda x: True,
        }.get(prim)
        if ok is None:
            self.err(path, f"schema type {t} has unknown primitive {prim}")
            return
        if not ok(v):
            self.err(path, f"{v!r} is not a {t}" + (f" ({prim})" if prim != t else ""))
            return
        sup = self.s.types.get(prim, {})
        if isinstance(v, str):
            ml = td.get("max_len", sup.get("max_len"))
            if ml is not None and len(v) > ml:
                self.err(path, f"longer than {t}'s {ml} characters")
            rx = td.get("regex")
            if rx and re.search(rx, v) is None:
                self.err(path, f"{v!r} does not match {t}'s pattern")
        rng = td.get("range")
        if rng and not (rng[0] <= v <= rng[1]):
            self.err(path, f"{v!r} is outside {t}'s range {rng}")
        vals = td.get("values", sup.get("values"))
        if vals is not None and v not in vals:
            self.err(path, f"{v!r} is not one of {t}'s values")

    def constraints(self, item, parent, entity, what):
        c = entity.get("constraints") or {}
        p = parent or "(record)"
        if "at_least_one" in c and not any(k in item for k in c["at_least_one"]):
            self.err(p, f"{what} needs at least one of {c['at_least_one']}")
        if "just_one" in c and sum(k in item for k in c["just_one"]) != 1:
            self.err(p, f"{what} needs exactly one of {c['just_one']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--schema", default=DEFAULT_SCHEMA)
    ap.add_argument("--version", help="the metadata.version to require (default: the schema's)")
    ap.add_argument("--quiet", action="store_true", help="no summary line")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    try:
        schema = Schema(args.schema)
    except (OSError, ValueError, KeyError) as e:
        print(f"ocsf_validate: schema {args.schema}: {e}", file=sys.stderr)
        return 2
    val = Validator(schema, args.version or schema.version)
    bad = total = 0
    for fn in args.files:
        try:
            lines = open(fn, encoding="utf-8").read().splitlines()
        except OSError as e:
            print(f"ocsf_validate: {fn}: {e}", file=sys.stderr)
            return 2
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            total += 1
            try:
                ev = json.loads(line)
            except ValueError as e:
                print(f"{fn}:{n}: (record): not JSON: {e}")
                bad += 1
                continue
            errs = val.event(ev)
            for path, msg in errs:
                print(f"{fn}:{n}: {path}: {msg}")
            bad += bool(errs)
    if not args.quiet:
        print(
            f"ocsf_validate: {total} record(s), {bad} invalid, against OCSF {schema.version}",
            file=sys.stderr,
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
