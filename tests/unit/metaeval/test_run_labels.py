"""Speed-table names of compared runs (issue 47, item 3): only the config values that differ."""

from cscore.metaeval.run_labels import run_labels

PROMPT = "Score the summary from 1 to 5. " * 20  # a long setting two methods do not share


def config(method: dict, pair: str = "qwen_3b_0.5b", **more) -> dict:
    return {"data": {"name": "summeval", "path": "/data/summeval.jsonl"},
            "pair": {"name": pair, "expert": {"path": f"/models/{pair}/expert"}},
            "method": method, "runtime": {"batch_size": 8, "progress": True},
            "hydra": {"run": {"dir": f"/out/{len(str(method))}"}}, **more}


def test_only_the_differing_keys_name_a_run():
    runs = [config({"name": "contrast", "variant": "contrast", "gamma": g, "prompt": PROMPT}, pair)
            for g, pair in [(0.1, "qwen_3b_0.5b"), (0.4, "qwen_3b_0.5b"), (0.1, "smollm2")]]
    assert run_labels(runs, ["0", "1", "2"]) == ["pair=qwen_3b_0.5b method.gamma=0.1",
                                                  "pair=qwen_3b_0.5b method.gamma=0.4",
                                                  "pair=smollm2 method.gamma=0.1"]


def test_two_methods_are_named_by_preset_and_only_their_own_differences():
    judge = {"name": "cd_judge", "variant": "cd_judge", "prompt": PROMPT, "lam": 0.1, "t": 1}
    runs = [config(judge), config({**judge, "lam": 1.0}), config({"name": "contrast", "variant": "contrast",
                                                                  "gamma": 0.1})]
    labels = run_labels(runs, ["a", "b", "c"])
    assert labels == ["method=cd_judge method.lam=0.1", "method=cd_judge method.lam=1.0", "method=contrast"]
    assert max(map(len, labels)) < 40


def test_where_nothing_differs_the_folder_names_the_run_and_a_long_value_keeps_its_end():
    same = config({"name": "contrast", "gamma": 0.1})
    assert run_labels([same, same], ["2026-12-06/10-00", "2026-12-06/11-00"]) == ["2026-12-06/10-00",
                                                                                  "2026-12-06/11-00"]
    deep = "/very/long/folder/of/models/that/goes/on/and/on/tiny-expert"
    paths = [config({"name": "contrast"}, "tiny"), config({"name": "contrast"}, "tiny")]
    paths[1]["pair"]["expert"]["path"] = deep
    assert run_labels(paths, ["x", "y"]) == ["pair.expert.path=/models/tiny/expert",
                                             "pair.expert.path=…" + deep[-39:]]
