"""Fuzz the data loaders and the judge-output parsers (hypothesis at scale).

Every loader gets small valid seed files (built here) that are then truncated, bit-flipped, spliced
with invalid UTF-8, deeply nested or given values of the wrong type. The only acceptable outcomes:
a validated example table whose ids are unique, or a one-line ``CscoreError`` that names the file.
A traceback, a multi-line message or a message without the file name is a finding.

    python scripts/fuzz.py --examples 2000 --seed 1          # every target, 2000 inputs each

tests/integration/test_fuzz_*.py run the same checks with a few dozen derandomized examples."""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import pickle
import sys
import tempfile
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hyp_seed
from hypothesis import strategies as st

ASPECTS = ("coherence", "consistency", "fluency", "relevance")


# ---------------------------------------------------------------------------------------------
# valid seed files, one per loader and format


def _summ_records(n=3):
    return [{"doc_id": f"d{i // 2}", "system": f"M{i}", "source": f"Article {i // 2} about a bridge.",
             "reference": "A bridge.", "references": ["A bridge.", "The bridge."], "hypothesis": f"Summary {i}.",
             "scores": {a: 1.0 + i for a in ASPECTS}} for i in range(n)]


def _jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def seed_files() -> dict[str, tuple[str, bytes, dict]]:
    """target name -> (file name, content, loader call: {"data": name} and the loader's options)."""
    demo = [{"id": f"doc{i}/s{i}", "doc_id": f"doc{i}", "system": f"s{i}", "source": f"Text {i}.",
             "reference": "Ref.", "hypothesis": f"Hyp {i}.", "scores": {"overall": i, "fluency": 2.5}}
            for i in range(3)]
    table = [{"id": f"r{i}", "src": f"Source {i}", "mt": f"Output {i}", "q": str(i), "sys": "A"} for i in range(3)]
    header = "id,src,mt,q,sys\n"
    csv_text = header + "".join(f'{r["id"]},"{r["src"]}",{r["mt"]},{r["q"]},{r["sys"]}\n' for r in table)
    table_opts = {"data": "table", "task": "translation", "lang_pair": "de-en",
                  "columns": {"source": "src", "hypothesis": "mt", "system": "sys", "human": ["q"]}}
    pkl = {f"d{i}": {"src": f"Article {i}.", "ref_summ": "Ref.", "ref_summs": ["Ref."],
                     "sys_summs": {"M1": {"sys_summ": f"Sum {i}.", "scores": {a: 3.0 for a in ASPECTS}}}}
           for i in range(2)}
    crowd = [{"article": f"Article {i} text.", "summary_sentences": [
        {"sentence": f"Summary {i}.", "responses": [{"worker_id": w, "response": "yes" if (i + w) % 2 else "no"}
                                                    for w in range(3)]}]} for i in range(3)]
    fed = [{"context": "User: Hi!\nSystem: Hello.\nUser: How are you?", "response": "System: Fine.",
            "system": "Meena", "annotations": {"Interesting": [2, 1, "N/A"], "Overall": [3, 4]}},
           {"context": "User: Hi!\nSystem: Hello.\nUser: How are you?\nSystem: Fine.\nUser: Bye.",
            "system": "Meena", "annotations": {"Coherent": [2, 2], "Overall": [1, 3]}}]
    dstc9 = {"contexts": [["Hi", "Hello"], ["Howdy"]], "responses": ["Fine.", "Sure."],
             "references": ["NO REF", "NO REF"], "scores": [4.0, 2.5]}
    mqm_rows = ["system\tdoc\tdoc_id\tseg_id\trater\tsource\ttarget\tcategory\tseverity"]
    for sys_name in ("A", "B"):
        for seg in (1, 2):
            mqm_rows.append(
                f"{sys_name}\ttalk.1\t1\t{seg}\trater1\t源文{seg}\tTarget <v>{seg}</v>\tAccuracy/Mistranslation\t"
                + ("Major" if seg == 1 else "Minor")
            )
            mqm_rows.append(f"{sys_name}\ttalk.1\t1\t{seg}\trater2\t源文{seg}\tTarget {seg}\tNo-error\tNo-error")
    return {
        "demo_jsonl": ("demo.jsonl", _jsonl(demo), {"data": "demo"}),
        "table_csv": ("t.csv", csv_text.encode(), table_opts),
        "table_tsv": ("t.tsv", csv_text.replace(",", "\t").replace('"', "").encode(), table_opts),
        "table_jsonl": ("t.jsonl", _jsonl(table), table_opts),
        "summeval_jsonl": ("summeval.jsonl", _jsonl(_summ_records()), {"data": "summeval"}),
        "summeval_pkl": ("data.pkl", pickle.dumps(pkl, protocol=4), {"data": "summeval"}),
        "qags_crowd_jsonl": ("mturk_xsum.jsonl", _jsonl(crowd), {"data": "qags_xsum"}),
        "qags_bartscore_jsonl": ("qags.jsonl", _jsonl([{**r, "source": f"Article {i}.", "scores": {"fact": 1.0}}
                                                   for i, r in enumerate(_summ_records())]),
                                 {"data": "qags_xsum"}),
        "fed_json": ("fed_data.json", json.dumps(fed).encode(), {"data": "fed"}),
        "dstc9_json": ("dstc9_data.json", json.dumps(dstc9).encode(), {"data": "dstc9"}),
        "mqm_tsv": ("mqm_ted_zhen.tsv", ("\n".join(mqm_rows) + "\n").encode(), {"data": "mqm"}),
        "mqm_tsv_gz": ("mqm_ted_zhen.tsv.gz", gzip.compress(("\n".join(mqm_rows) + "\n").encode(), mtime=0),
                       {"data": "mqm"}),
        "table_parquet": ("t.parquet", _parquet(table), table_opts),
    }


def _parquet(records) -> bytes:
    import pandas as pd

    buf = io.BytesIO()
    pd.DataFrame(records).to_parquet(buf, index=False)
    return buf.getvalue()


# ---------------------------------------------------------------------------------------------
# mutations


def _json_values():
    """Adversarial JSON values: wrong types, huge or non-finite numbers, odd strings."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.just(10**400),
        st.floats(allow_nan=True),
        st.text(max_size=8),
        st.just(""),
        st.just("\u2028"),
        st.just("{source}"),
        st.lists(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    )


@st.composite
def mutated(draw, content: bytes) -> bytes:
    """One mutation (or a short chain of them) of ``content``."""
    data = bytearray(content)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "delete", "bad_utf8", "nest", "big_int",
                                     "value", "random"]))
        pos = draw(st.integers(0, max(len(data), 1) - 1)) if data else 0
        if kind == "truncate":
            data = data[:pos]
        elif kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            data[pos:pos + draw(st.integers(1, 16))] = b""
        elif kind == "bad_utf8":
            data[pos:pos] = draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\r", b"\t", b'"',
                                                    b"\\udc40", b"\\ud83d"]))
        elif kind == "nest":
            depth = draw(st.integers(1000, 100000))
            data[pos:pos] = b"[" * depth
        elif kind == "big_int":
            data[pos:pos] = b"9" * draw(st.sampled_from([400, 5000]))
        elif kind == "value":
            data = bytearray(_replace_value(bytes(data), draw))
        else:
            data = bytearray(draw(st.binary(max_size=64)))
    return bytes(data)


def _replace_value(content: bytes, draw) -> bytes:
    """Set one field of one JSON record (JSON array, object or JSONL) to an adversarial value."""
    try:
        text = content.decode()
        lines = text.split("\n")
        docs = [json.loads(x) for x in lines if x.strip()] if "\n" in text.strip() else [json.loads(text)]
    except (ValueError, RecursionError):
        return content
    doc_i = draw(st.integers(0, len(docs) - 1))
    node = docs[doc_i]
    for _ in range(draw(st.integers(1, 4))):  # walk down a few levels
        children = (
            list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
        )
        if not children:
            break
        key, child = draw(st.sampled_from(children))
        if not isinstance(child, (dict, list)) or draw(st.booleans()):
            node[key] = draw(_json_values())
            break
        node = child
    dump = [json.dumps(d) for d in docs]
    return ("\n".join(dump) + "\n" if len(docs) > 1 else dump[0]).encode()


# ---------------------------------------------------------------------------------------------
# the check


class Finding(AssertionError):
    """A loader outcome that breaks the contract (a traceback, a bad message, a bad table)."""


def check_load(file: Path, call: dict) -> str:
    """Load ``file`` as ``call`` says; "ok" or "error", or raise Finding."""
    from cscore.data.registry import load_config
    from cscore.errors import CscoreError

    opts = {k: v for k, v in call.items() if k != "data"}
    try:
        df, report = load_config({**opts, "name": call["data"], "path": str(file)})
    except CscoreError as err:
        msg = str(err)
        if "\n" in msg or file.name not in msg:
            raise Finding(f"bad error message ({type(err).__name__}): {msg[:300]!r}") from err
        return "error"
    except Exception as err:
        raise Finding(f"traceback: {type(err).__name__}: {str(err)[:200]}\n{traceback.format_exc()[-1500:]}") from err
    ids = list(df["id"])
    if len(set(ids)) != len(ids):
        raise Finding("duplicate ids in a validated table")
    if df["hypothesis"].isna().any() or (df["hypothesis"].astype(str).str.strip() == "").any():
        raise Finding("an empty hypothesis in a validated table")
    human = [c for c in df.columns if c.startswith("human.")]
    if not human or any(df[c].dtype.kind != "f" for c in human):
        raise Finding(f"human columns {human} are not float")
    if any(not (math.isnan(v) or math.isfinite(v)) for c in human for v in df[c]):
        raise Finding("a non-finite human score in a validated table")
    dropped = {d["id"] for d in report.dropped} | {d["id"] for d in report.excluded}
    if set(ids) & dropped:
        raise Finding("a row is both in the table and reported as left out")
    return "ok"


def run_target(name: str, examples: int, seed: int | None, folder: Path, derandomize: bool = False) -> dict:
    """Fuzz one loader target; returns counts of outcomes and the findings (messages)."""
    file_name, content, call = seed_files()[name]
    counts = {"ok": 0, "error": 0, "finding": 0}
    findings: list[str] = []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck), phases=["generate"])
    @given(mutated(content))
    def body(data):
        file = folder / file_name
        file.write_bytes(data)
        try:
            counts[check_load(file, call)] += 1
        except Finding as f:
            counts["finding"] += 1
            findings.append(str(f).split("\n")[0])

    if seed is not None and not derandomize:
        body = hyp_seed(seed)(body)
    body()
    return {"target": name, "examples": examples, **counts, "findings": sorted(set(findings))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--examples", type=int, default=1000, help="inputs per target")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", nargs="*", default=None)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    import logging
    logging.disable(logging.WARNING)
    results, start = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.targets or list(seed_files()) + ["judge_parse"]:
            t0 = time.perf_counter()
            r = run_parsers(args.examples, args.seed) if name == "judge_parse" else \
                run_target(name, args.examples, args.seed, Path(tmp))
            r["seconds"] = round(time.perf_counter() - t0, 1)
            results.append(r)
            print(f"{r['target']:22s} seed {args.seed} examples {r['examples']:6d} ok {r['ok']:6d} "
                  f"error {r['error']:6d} findings {r['finding']} ({r['seconds']} s)", flush=True)
            for f in r["findings"]:
                print(f"    {f}")
    print(f"total {sum(r['examples'] for r in results)} inputs in {time.perf_counter() - start:.0f} s; "
          f"{sum(r['finding'] for r in results)} findings")
    if args.json:
        Path(args.json).write_text(json.dumps({"seed": args.seed, "results": results}, indent=1))
    return 1 if any(r["finding"] for r in results) else 0


def check_parse(text: str, lo: int, hi: int) -> None:
    """Both judge parsers on any text: a score inside [lo, hi] and a known status, never an exception;
    every prefix ``settled`` calls final reads as the whole text does (the greedy stop is sound)."""
    from cscore.scorers.judge.parse import NO_PRED, PARSERS, STATUSES, VALID, read_score, settled

    for name, parse in PARSERS.items():
        score, status = parse(text, lo, hi)
        if status not in STATUSES or not (lo <= score <= hi) or not math.isfinite(score):
            raise Finding(f"{name} parse of {text!r} in [{lo}, {hi}] gave {(score, status)}")
        if status == NO_PRED and score != lo:
            raise Finding(f"{name}: No Pred of {text!r} is not the minimum")
        if status not in VALID and status != NO_PRED and score not in (lo, hi):
            raise Finding(f"{name}: clamped score of {text!r} is {score}")
        whole = read_score(text[:200], lo, hi, name)
        for k in range(min(len(text), 200)):
            if settled(text[:k], name, lo, hi) and read_score(text[:k], lo, hi, name) != whole:
                raise Finding(f"{name}: {text[:k]!r} is settled but {text[:200]!r} reads {whole}")


def judge_texts():
    digits = st.text(alphabet="0123456789.+- \n:٣۵", max_size=12)
    return st.one_of(st.text(max_size=40), digits, st.builds(lambda a, b: a + b, st.sampled_from(
        ["Score: ", "coherence: ", "- ", " ", "answer", "assistant", "assis", "The ", ""]), digits),
        st.just("9" * 5000), st.just("1e999"))


def run_parsers(examples: int, seed: int | None, derandomize: bool = False) -> dict:
    counts = {"ok": 0, "error": 0, "finding": 0}
    findings: list[str] = []

    @settings(max_examples=examples, deadline=None, database=None, derandomize=derandomize,
              suppress_health_check=list(HealthCheck), phases=["generate"])
    @given(judge_texts(), st.integers(-5, 5), st.integers(1, 12))
    def body(text, lo, width):
        try:
            check_parse(text, lo, lo + width)
            counts["ok"] += 1
        except Finding as f:
            counts["finding"] += 1
            findings.append(str(f))
        except Exception as err:
            counts["finding"] += 1
            findings.append(f"traceback: {type(err).__name__}: {err} on {text[:40]!r}")

    if seed is not None and not derandomize:
        body = hyp_seed(seed)(body)
    body()
    return {"target": "judge_parse", "examples": examples, **counts, "findings": sorted(set(findings))}


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main())
