"""Hostile inputs for :mod:`benchmarks.fuzz`: option values, and the contents of the files a user
hands ``nnqs`` (FCIDUMP, XYZ, TOML config, A5 data) or leaves in a run folder.

Every generator draws from the ``random.Random`` it is given, so a round is fixed by its seed.
A generator returns ``(label, content)``: the label says what is hostile, for the case log.
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

# Values for an option, by the type it parses as. BIG ones are legal for some options and would make
# a real run long (steps, widths, threads): they go only to runs whose expensive work is stubbed.
INTS = ["-1", "0", "-0", "1", "2", "3", "+1", " 2", "\u0663", "-99999999999999999999", "07"]
FLOATS = ["nan", "-nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1e400", "1e-400", "1.5", "-2.5", "0", "-0.0",
          "1e3", "1e-300", "0.999999999999999999"]
BIG = {"int": [str(2**63), str(2**63 - 1), str(2**64), str(2**31), "4096", "1000000", "99999999999999999999999999"],
       "float": ["1e30", "1e308", "4096"]}
TEXTS = ["", " ", "\t", "\u00fc", "\u65e5\u672c\u8a9e", "\u202eevil", "a" * 3000, "--steps", "-h", "--", "-1x",
         "--out=x", "'", '"', "\\", "a\nb", "\r", "\udcff\udcfe", "%s%n", "../../x", "None", "null", "true", "0x10",
         "1/2", "1,5", "1_0", "cpu", "cuda", "cuda:x", "cuda:99", "meta", "mps", "cpu:0", "float16", "sr", "adamw",
         "exact", "core", "samples", "sci", "mp1", "real", "complex", "decoder", "seq2seq", "encoder", "iterative",
         "H2", "\x1b[31mred"]


def value(rng: random.Random, kind: str, safe: bool) -> str:
    """A hostile value for an option of ``kind`` (int, float or str): mostly one that parses as that
    type, else anything; ``safe``: none that a real run would take as 'a lot of work'."""
    typed = {"int": INTS, "float": FLOATS}.get(kind, TEXTS)
    pool = typed if rng.random() < 0.65 else INTS + FLOATS + TEXTS
    big = [] if safe else BIG.get(kind, BIG["int"])
    return rng.choice(pool + big * 3)


# Shapes of a command line that no value fixes.
def structure(rng: random.Random, flags: list[str]) -> tuple[str, list[str]]:
    """(label, tokens) appended to a valid command line: unknown, repeated, abbreviated or valueless flags."""
    flag = rng.choice(flags)
    choices = [
        ("unknown flag", ["--bogus"]), ("unknown flag with value", ["--bogus=1"]),
        ("upper-case flag", [flag.upper(), "1"]), ("abbreviated flag", [flag[:max(3, len(flag) - 2)], "1"]),
        ("ambiguous prefix", ["--s", "1"]), ("short flag", ["-s", "1"]), ("missing value at the end", [flag]),
        ("missing value before a flag", [flag, "--json"]), ("repeated flag", [flag, "1", flag, "2"]),
        ("flag=empty", [f"{flag}="]), ("resume and overwrite", ["--resume", "--overwrite"]),
        ("extra positional", ["LiH"]), ("double dash", ["--"]), ("double dash then flag", ["--", flag]),
        ("lone dash", ["-"]), ("bare --=", ["--=1"]), ("flag value with =", [f"{flag}=--x"]),
        ("json twice", ["--json", "--json"]), ("store_true with a value", ["--json=1"]), ("help", ["-h"]),
    ]
    return rng.choice(choices)


# Molecules that are hostile yet cheap (2 electrons or fewer, or refused): safe for real runs.
MOLECULES = [
    ["H2", "--charge", "2"], ["H2", "--charge", "1"], ["H2", "--charge", "-2"], ["H2", "--spin", "2"],
    ["H2", "--spin", "1"], ["H2", "--spin", "-2"], ["H2", "--spin", "4"], ["H2", "--spin", "-99999999999999999"],
    ["H2", "--active", "1", "2"], ["H2", "--active", "0", "0"], ["H2", "--active", "2", "4"],
    ["H2", "--active", "-1", "2"], ["H2", "--active", "99", "2"], ["H2", "--active", "2", "1"],
    ["H2", "--active", "1", "1"], ["H2", "--active", "1"], ["H2", "--basis", ""], ["H2", "--basis", "6-31g"],
    ["H2", "--basis", "../../etc/passwd"], ["h2"], ["H2O2"], [""], ["H2", "--geometry", "H 0 0 0; H 0 0 1"],
    ["--fcidump", "/nonexistent/FCIDUMP"], ["--xyz", "/nonexistent.xyz"],
    ["--geometry", "H 0 0 0; H 0 0 0"], ["--geometry", "H 0 0 0; H 0 0 0.05"], ["--geometry", "H 0 0 0; H 0 0 nan"],
    ["--geometry", "H 0 0 0; H 0 0 inf"], ["--geometry", "H 0 0 0; H 0 0 1e400"], ["--geometry", "He 0 0 0"],
    ["--geometry", "H 0 0 0"], ["--geometry", "H 0 0 0", "--spin", "1"], ["--geometry", "X 0 0 0; H 0 0 1"],
    ["--geometry", "Xx 0 0 0"], ["--geometry", ""], ["--geometry", ";;;"], ["--geometry", "H 0 0; H 0 0 1"],
    ["--geometry", "H 0 0 0 0; H 0 0 1"], ["--geometry", "H 0 0 0; H 0 0 30"],
    ["--geometry", "H\t0\t0\t0\nH 0 0 0.74"], ["--geometry", "h 0 0 0; h 0 0 0.74"],
    ["--geometry", "H1 0 0 0; H2 0 0 0.74"], ["--geometry", "H 0,0,0; H 0,0,0.74"],
    ["--geometry", "H 0 0 0; H 0 0 0.74", "--basis", "nonsense"], ["--geometry", "Og 0 0 0"],
    ["--geometry", "He 0 0 0; He 0 0 0.1"], ["--geometry", "H 0 0 0; H 0 0 0.74", "--charge", "99999999999999999999"],
    ["--geometry", "H 0 0 0; H 0 0 0.74", "--basis", "sto-3g", "--charge", "0"],
    ["--geometry", "H 0 0 0; H 0 0 0.74\n"], ["--geometry", "\u0397 0 0 0; H 0 0 0.74"],
    ["--geometry", "H \u0660 0 0; H 0 0 0.74"],
]


def random_bytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


def _lines_edit(text: str, rng: random.Random, edit) -> str:
    """``text`` with ``edit(fields)`` applied to the fields of one random integral line."""
    lines = text.splitlines()
    body = [i for i, line in enumerate(lines) if line.split() and line.split()[0][0] in "-0123456789 "
            and len(line.split()) == 5]
    i = rng.choice(body)
    fields = lines[i].split()
    lines[i] = " ".join(edit(fields))
    return "\n".join(lines) + "\n"


def _header(text: str, key: str, new: str | None) -> str:
    """``text`` with header field ``key`` set to ``new`` (removed if None)."""
    import re

    pattern = re.compile(rf"{key}=[^,]*,")
    return pattern.sub("" if new is None else f"{key}={new},", text, count=1)


def fcidump(rng: random.Random, text: str) -> tuple[str, bytes]:
    """A hostile variant of the FCIDUMP ``text`` (a real one, written by ``write_fcidump``)."""
    lines = text.splitlines()
    bad_value = rng.choice(["nan", "inf", "-inf", "1e400", "1.0D+999", "abc", "--", "0x1p3", "1,0"])
    bad_index = rng.choice(["0", "-1", "99", "99999999999999999999", "1.5", "a", str(2**63)])
    field = rng.choice(["NORB", "NELEC", "MS2"])
    bad_header = rng.choice(["0", "-1", "1", "3", "200", "1000000000", "abc", "", "2.5", "1e3", "99999999999999999999"])
    cut = rng.randrange(len(text))
    n_lines = rng.randrange(1, len(lines))
    choices = [
        ("random bytes", lambda: random_bytes(rng, rng.choice([1, 64, 4096]))),
        ("empty", lambda: b""), ("header only", lambda: "\n".join(lines[:4]).encode()),
        ("no header", lambda: "\n".join(lines[4:]).encode()),
        (f"cut at byte {cut}", lambda: text[:cut].encode()),
        (f"first {n_lines} lines", lambda: "\n".join(lines[:n_lines]).encode()),
        (f"a value {bad_value}", lambda: _lines_edit(text, rng, lambda f: [bad_value, *f[1:]]).encode()),
        (f"an index {bad_index}", lambda: _lines_edit(text, rng, lambda f: [f[0], bad_index, *f[2:]]).encode()),
        (f"{field}={bad_header!r}", lambda: _header(text, field, bad_header).encode()),
        (f"no {field}", lambda: _header(text, field, None).encode()),
        ("core energy nan", lambda: text.replace(lines[-1], "nan 0 0 0 0").encode()),
        ("core line first", lambda: "\n".join(lines[:4] + lines[-1:] + lines[4:-1]).encode()),
        ("no core line", lambda: "\n".join(lines[:-1]).encode()),
        ("a line repeated", lambda: "\n".join(lines[:5] + lines[4:]).encode()),
        ("asymmetric integrals", lambda: _asymmetric(text).encode()),
        ("CRLF line ends", lambda: text.replace("\n", "\r\n").encode()),
        ("BOM", lambda: b"\xef\xbb\xbf" + text.encode()), ("UTF-16", lambda: text.encode("utf-16")),
        ("tabs", lambda: text.replace(" ", "\t").encode()),
        ("blank lines", lambda: text.replace("\n", "\n\n").encode()),
        ("Fortran exponents", lambda: text.replace("e", "D").encode()),
        ("lower-case header", lambda: text.replace("&FCI", "&fci").replace("&END", "&end").encode()),
        ("no &END", lambda: text.replace("&END", "").encode()),
        ("trailing garbage", lambda: (text + "garbage\n").encode()),
        ("a sixth column", lambda: _lines_edit(text, rng, lambda f: [*f, "7"]).encode()),
        ("orbital energy lines", lambda: text.replace(lines[-1], f"-0.5 1 0 0 0\n{lines[-1]}").encode()),
        ("NUL bytes", lambda: text.replace("\n", "\n\0", 2).encode()),
        ("NORB=129, over the limit", lambda: _header(text, "NORB", "129").encode()),
    ]
    label, make = rng.choice(choices)
    return label, make()


def _asymmetric(text: str) -> str:
    """``text`` plus the partner of one off-diagonal integral with another value, before the core line."""
    lines = text.splitlines()
    for line in lines:
        v, *idx = line.split() if len(line.split()) == 5 else ("", "0", "0", "0", "0")
        i, j, k, l = idx
        if idx[2:] == ["0", "0"] and i != j:
            return "\n".join(lines[:-1] + [f"{float(v) + 0.1} {j} {i} 0 0", lines[-1]]) + "\n"
        if "0" not in idx and (i, j) != (k, l):
            return "\n".join(lines[:-1] + [f"{float(v) + 0.1} {k} {l} {i} {j}", lines[-1]]) + "\n"
    return text


XYZ_GOOD = "2\nH2\nH 0.0 0.0 0.0\nH 0.0 0.0 0.74\n"


def xyz(rng: random.Random) -> tuple[str, bytes]:
    """A hostile XYZ file."""
    many = rng.choice([3, 129, 1000])
    choices = [
        ("count too high", "3\nH2\nH 0 0 0\nH 0 0 0.74\n"), ("count zero", "0\nH2\n"), ("count -1", "-1\nx\nH 0 0 0\n"),
        ("count not a number", "two\nH2\nH 0 0 0\nH 0 0 0.74\n"), ("huge count", "99999999999999999999\nx\nH 0 0 0\n"),
        ("no comment line", "2\nH 0 0 0\nH 0 0 0.74\n"), ("nan coordinate", "2\nx\nH 0 0 0\nH 0 0 nan\n"),
        ("1e400 coordinate", "2\nx\nH 0 0 0\nH 0 0 1e400\n"), ("three columns", "2\nx\nH 0 0\nH 0 0.74\n"),
        ("five columns", "2\nx\nH 0 0 0 1\nH 0 0 0.74 1\n"), ("unknown element", "2\nx\nQ 0 0 0\nH 0 0 0.74\n"),
        ("atomic numbers", "2\nx\n1 0 0 0\n1 0 0 0.74\n"), ("lower case", XYZ_GOOD.replace("H ", "h ")),
        ("empty", ""), ("count only", "2\n"), ("one hydrogen", "1\nx\nH 0 0 0\n"), ("helium", "1\nx\nHe 0 0 0\n"),
        ("atoms on top of each other", "2\nx\nH 0 0 0\nH 0 0 0\n"), ("CRLF", XYZ_GOOD.replace("\n", "\r\n")),
        ("tabs", XYZ_GOOD.replace(" ", "\t")), ("unicode comment", XYZ_GOOD.replace("H2", "\u00e9t\u00e9 \U0001f600")),
        ("blank lines at the end", XYZ_GOOD + "\n\n\n"), ("blank line between atoms", "2\nx\nH 0 0 0\n\nH 0 0 0.74\n"),
        (f"{many} hydrogens", f"{many}\nx\n" + "".join(f"H 0 0 {0.8 * i}\n" for i in range(many))),
        ("comma separated", "2\nx\nH,0,0,0\nH,0,0,0.74\n"), ("semicolons", "2\nx\nH 0 0 0;\nH 0 0 0.74;\n"),
        ("far apart", "2\nx\nH 0 0 0\nH 0 0 1e6\n"), ("Fortran exponent", "2\nx\nH 0 0 0\nH 0 0 0.74D0\n"),
    ]
    label, text = rng.choice(choices)
    kind = rng.random()
    if kind < 0.08:
        return "random bytes", random_bytes(rng, rng.choice([16, 512]))
    if kind < 0.12:
        return "UTF-16", XYZ_GOOD.encode("utf-16")
    return label, text.encode()


def toml(rng: random.Random, keys: list[str]) -> tuple[str, bytes]:
    """A hostile TOML run config for a dataclass with fields ``keys``."""
    key = rng.choice(keys)
    raw = rng.choice(["nan", "inf", "-inf", "-1", "0", "1.5", "true", "'x'", "''", "[1, 2]", "99999999999999999999",
                      "1e400", "{ a = 1 }", "1979-05-27", "'\u00fc'", "'cuda:x'", "'meta'", "2", "1024", "1000000"])
    choices = [
        (f"{key} = {raw}", f"{key} = {raw}\n"), ("unknown key", "bogus = 1\n"),
        ("capitalised key", f"{key.capitalize()} = 1\n"),
        ("not TOML", "steps ==\n"), ("a table", "[run]\nsteps = 1\n"), ("a dotted key", f"{key}.x = 1\n"),
        ("a key twice", f"{key} = 1\n{key} = 2\n"), ("deep nesting", "a = " + "[" * 5000 + "]" * 5000 + "\n"),
        ("huge string", f"{key} = '{'x' * 100000}'\n"), ("empty", ""), ("BOM", f"\ufeff{key} = 1\n"),
        ("comment only", "# nothing\n"), ("array of tables", "[[x]]\na = 1\n"),
        ("two keys", f"{key} = {raw}\n{rng.choice(keys)} = {raw}\n"),
        ("d_model not divisible", "d_model = 7\nn_heads = 2\n"),
        ("threads over the limit", "threads = 1025\n"),
    ]
    draw = rng.random()
    if draw < 0.06:
        return "random bytes", random_bytes(rng, rng.choice([8, 300]))
    if draw < 0.09:
        return "UTF-16", f"{key} = 1\n".encode("utf-16")
    label, text = rng.choice(choices)
    return label, text.encode()


QUESTION = "BOS POSITIVE 01 add NEGATIVE 02 EOS"
ANSWER = "BOS NEGATIVE 01 EOS"


def a5(questions: list, answers: list) -> bytes:
    return json.dumps({"inp_expression": questions, "out_expression": answers}).encode()


def lm_data(rng: random.Random) -> tuple[str, bytes]:
    """A hostile A5 data file (``{"inp_expression": [...], "out_expression": [...]}``)."""
    token = rng.choice(["POSITIVE 999", "POSITIVE 1e400", "NEGATIVE -01", "PLUS 01", "multiply", "", "\u00fc", "nan",
                        "POSITIVE 0x1", "POSITIVE 01 POSITIVE 02", "BOS", "EOS", "PAD", "MASK", "<unk>"])
    choices = [
        ("empty", b""), ("not JSON", b"{inp_expression: []}"), ("a JSON list", b"[]"), ("null", b"null"),
        ("no answers key", json.dumps({"inp_expression": [QUESTION]}).encode()),
        ("unequal lengths", a5([QUESTION, QUESTION], [ANSWER])), ("no pairs", a5([], [])),
        ("numbers, not strings", a5([1], [2])), ("nested lists", a5([[QUESTION]], [[ANSWER]])),
        (f"a question with {token!r}", a5([QUESTION.replace("01", token, 1)], [ANSWER])),
        (f"an answer with {token!r}", a5([QUESTION], [ANSWER.replace("01", token, 1)])),
        ("huge operand", a5(["BOS POSITIVE 99999999999999999999 add POSITIVE 01 EOS"], [ANSWER])),
        ("a wrong answer", a5([QUESTION], ["BOS POSITIVE 42 EOS"])), ("no BOS", a5([QUESTION[4:]], [ANSWER])),
        ("a 20,000-token question", a5(["BOS " + "POSITIVE 01 add " * 5000 + "POSITIVE 01 EOS"], [ANSWER])),
        ("deep nesting", b"[" * 100000 + b"]" * 100000),
        ("NaN value", b'{"inp_expression": NaN, "out_expression": NaN}'),
        ("1e400 value", b'{"inp_expression": 1e400, "out_expression": []}'),
        ("BOM", b"\xef\xbb\xbf" + a5([QUESTION], [ANSWER])),
        ("UTF-16", a5([QUESTION], [ANSWER]).decode().encode("utf-16")),
        ("duplicate keys", b'{"inp_expression": [], ' + a5([QUESTION], [ANSWER])[1:]),
        ("extra keys", json.dumps({"inp_expression": [QUESTION], "out_expression": [ANSWER], "x": 1}).encode()),
        ("trailing garbage", a5([QUESTION], [ANSWER]) + b" ]"),
        ("lone surrogate escape", a5(["\ud800"], [ANSWER])),  # json writes it as the escape \\ud800
        ("many duplicates", a5([QUESTION] * 3000, [ANSWER] * 3000)),
        ("tabs in a question", a5([QUESTION.replace(" ", "\t")], [ANSWER])),
    ]
    if rng.random() < 0.08:
        return "random bytes", random_bytes(rng, rng.choice([8, 2048]))
    return rng.choice(choices)


def corrupt(rng: random.Random, path: Path, donor: Path | None) -> str:
    """Damage the run file ``path`` in one random way (``donor``: the same file of another run); its label."""
    data = path.read_bytes() if path.is_file() else b""
    cut = rng.randrange(max(1, len(data)))
    hows = ["truncated", "random bytes", "one byte flipped", "empty", "deleted", "another run's", "a folder", "doubled",
            "1 MB of zeros"]
    how = rng.choice(hows + (["edited"] if path.suffix in (".toml", ".csv") else []))
    if how == "another run's" and donor is None:
        how = "random bytes"
    path.unlink(missing_ok=True)
    if how == "truncated":
        path.write_bytes(data[:cut])
        return f"{path.name} cut at byte {cut} of {len(data)}"
    if how == "random bytes":
        path.write_bytes(random_bytes(rng, len(data) or 64))
    elif how == "one byte flipped":
        flipped = bytes([data[cut] ^ (1 << rng.randrange(8))]) if data else b"\x01"
        path.write_bytes(data[:cut] + flipped + data[cut + 1:])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "another run's":
        shutil.copyfile(donor, path) if donor.is_file() else path.write_bytes(b"")
        how = f"{how} ({donor.parent.name})"
    elif how == "a folder":
        path.mkdir()
    elif how == "doubled":
        path.write_bytes(data + data)
    elif how == "1 MB of zeros":
        path.write_bytes(bytes(1 << 20))
    elif how == "edited":
        how, text = _edit(rng, data.decode("utf-8", "replace"), path.suffix)
        path.write_bytes(text.encode())
    return f"{path.name} {how}"


def _edit(rng: random.Random, text: str, suffix: str) -> tuple[str, str]:
    """(label, text): a plausible hand edit of a config.toml or history.csv."""
    lines = text.splitlines()
    if suffix == ".toml":
        edits = ["d_model = 16", "seed = 5", "steps = 2", "lr = 0.5", "bogus = 1", "d_model = 'eight'", "n_heads = 3",
                 "threads = -1", "steps = 9"]
        edit = rng.choice(edits)
        kept = [ln for ln in lines if not ln.startswith(edit.split(" =")[0] + " ")]
        return f"edited: {edit}", "\n".join(kept + [edit]) + "\n"
    header, rows = lines[:1], lines[1:] or [""]
    edits = {"a row twice": lambda: rows + rows[-1:], "a row missing": lambda: rows[:-2] + rows[-1:],
             "rows reversed": lambda: rows[::-1], "a garbage row": lambda: rows + ["\x00garbage,,,"],
             "header only": lambda: [], "nan values": lambda: [r.split(",")[0] + ",nan" * r.count(",") for r in rows],
             "a row cut short": lambda: rows[:-1] + [rows[-1][:len(rows[-1]) // 2]]}
    edit = rng.choice([*edits, "no header", "an extra column"])
    if edit == "no header":
        return f"edited: {edit}", "\n".join(rows) + "\n"
    if edit == "an extra column":
        return f"edited: {edit}", "\n".join([header[0] + ",extra"] + [r + ",1" for r in rows]) + "\n"
    return f"edited: {edit}", "\n".join(header + edits[edit]()) + "\n"


def corrupt_cache(rng: random.Random, folder: Path) -> str:
    """Damage one entry of an ``NNQS_CACHE_DIR`` (the Hamiltonian or references of a molecule); its label."""
    import numpy as np

    path = rng.choice(sorted(folder.iterdir()))
    kind = path.name.split(".", 1)[1]
    draw = rng.random()
    if draw < 0.25:
        return f"cache {kind}: " + corrupt(rng, path, None)
    if path.suffix == ".npz":
        with np.load(path) as npz:
            arrays = {name: npz[name] for name in npz.files}
        name = rng.choice(sorted(arrays))
        edit = rng.choice(["nan", "inf", "shape", "1e300", "dropped"])
        if edit == "dropped":
            arrays.pop(name)
        else:
            a = arrays[name].copy()
            a.flat[rng.randrange(a.size)] = {"nan": np.nan, "inf": np.inf, "1e300": 1e300, "shape": 0.0}[edit]
            arrays[name] = a[..., :1] if edit == "shape" else a
        np.savez(path, **arrays)
        return f"cache {kind}: {name} {edit}"
    data = json.loads(path.read_text())
    leaf = data["exact"] if "exact" in data and rng.random() < 0.6 else data
    key = rng.choice(sorted(leaf))
    new = rng.choice([float("nan"), float("inf"), -1e300, "x", None, [], -1, 99, True])
    leaf[key] = new
    path.write_text(json.dumps(data))
    return f"cache {kind}: {key} = {new!r}"
