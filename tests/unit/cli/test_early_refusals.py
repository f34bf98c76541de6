"""Issue 47 item 8: a data file its loader cannot read and a runtime.max_length no prompt fits are
refused by the precheck, before torch or transformers is imported (they took 15-25 s under load
after those imports): one line, exit 2, no run directory. What the precheck read is the job's."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

# cscore's main in a fresh interpreter; at exit (SystemExit included) the heavy modules it loaded, on stdout
COMMAND = """
import sys
from cscore.cli.main import main
try:
    main(sys.argv[1:])
finally:
    print("heavy loaded:", [m for m in ("torch", "transformers") if m in sys.modules])
"""


def refused(args: list[str], cwd) -> str:
    """The one error line of ``cscore run <args>``, checked to come before torch with exit 2."""
    res = subprocess.run([sys.executable, "-c", COMMAND, "run", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=300)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("cscore: error: "), res.stdout + res.stderr
    assert "heavy loaded: []" in res.stdout, res.stdout
    assert not (cwd / "outputs").exists()
    return lines[0]


@pytest.mark.parametrize("name, text, says", [
    ("bad.csv", "hyp,src,human.q\na,b,1\n",
     "bad.csv: no hypothesis column; set data.columns.hypothesis=<column> (columns: ['hyp', 'src', 'human.q'])"),
    ("bad.jsonl", '{"hypothesis": "a", "source": "b", "human.q": 1}\n{"hypothesis": \n',
     "bad.jsonl:2:16: not valid JSON: Expecting value: line 2 column 16"),
    ("bad.tsv", "hypothesis\tsource\thuman.q\na\tb\tgood\n",
     "bad.tsv row 1: column 'human.q' (data.columns.human) is not numeric: 'good'"),
])
def test_a_data_file_its_loader_cannot_read_is_refused_before_torch(tiny_dirs, tmp_path, name, text, says):
    (tmp_path / name).write_text(text)
    line = refused([f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
                    "pair.amateur.early_exit=null", "data=table", "data.task=summarization",
                    f"data.path={tmp_path / name}"], tmp_path)
    assert says in line, line


def test_a_max_length_no_prompt_fits_is_refused_before_torch(tiny_dirs, tmp_path):
    from transformers import AutoTokenizer

    from cscore.data import prompts

    # the count independently: transformers' tokenizer of the expert, on the template without its source
    tok = AutoTokenizer.from_pretrained(tiny_dirs.expert)
    n = len(tok(prompts.TEMPLATES["summarization"].replace("{source}", ""), add_special_tokens=False)["input_ids"])
    assert n + 1 > 8
    line = refused([f"pair.expert.path={tiny_dirs.expert}", f"pair.amateur.path={tiny_dirs.amateur}",
                    "pair.amateur.early_exit=null", "runtime.max_length=8"], tmp_path)
    assert line == (f"cscore: error: runtime.max_length=8 is too small for any item: the shortest prompt this run "
                    f"can build (the summarization template, with its source removed) is {n} tokens for the "
                    "expert's tokenizer, and a hypothesis needs at least one more; raise runtime.max_length "
                    "(default 1024)")


def test_tokenizers_counts_a_prompt_as_transformers_does(tiny_dirs):
    """The precheck reads tokenizer.json with ``tokenizers`` alone; its counts are transformers'."""
    from transformers import AutoTokenizer

    from cscore.data import prompts
    from cscore.run import pair_check

    slow, fast = AutoTokenizer.from_pretrained(tiny_dirs.other), pair_check.fast_tokenizer(
        f"{tiny_dirs.other}/tokenizer.json")
    texts = [t.replace("{source}", "") for t in prompts.TEMPLATES.values()] + ["a  zebra\n\nquartz", ""]
    for text in texts:
        for seq2seq in (False, True):
            want = max(len(slow(text, add_special_tokens=seq2seq)["input_ids"]), 1) if text or seq2seq else 1
            assert pair_check.prompt_tokens(fast, text, seq2seq) == want, (text, seq2seq)
    assert fast.get_vocab() == slow.get_vocab()


def test_what_the_precheck_read_is_taken_once_by_the_job():
    from cscore.data import registry

    data = SimpleNamespace(name="demo", path=None, options=None)  # the typed section: no options given
    registry.PRELOADED.clear()
    registry.preload(data)
    kept = registry.PRELOADED[registry.data_key(data)]
    registry.preload(data)  # the same key again (another point of a multirun): not read twice
    assert len(registry.PRELOADED) == 1 and registry.PRELOADED[registry.data_key(data)] is kept
    assert registry.load_data(data) is kept and not registry.PRELOADED
    again, _ = registry.load_data(data)  # taken: the next job reads the file itself
    assert again is not kept[0] and again.equals(kept[0]) and len(again) == 160
