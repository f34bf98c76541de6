"""The one plugin registry (cscore.registry): registration, base check, collisions, did-you-mean."""
import pytest

from cscore.errors import ConfigError, CscoreError
from cscore.registry import Registry, suggest, unknown_keys


class Base:
    pass


def test_register_get_and_names():
    reg: Registry[Base] = Registry("widget", Base)

    @reg.register("alpha")
    class A(Base):
        pass

    @reg.register("beta")
    class B(Base):
        pass

    assert reg.get("alpha") is A and reg.get("beta") is B
    assert reg.names() == ["alpha", "beta"] and list(reg) == ["alpha", "beta"] and len(reg) == 2
    assert "alpha" in reg and "gamma" not in reg
    assert reg.items() == [("alpha", A), ("beta", B)]


def test_wrong_base_and_collision_refused_in_one_line():
    reg: Registry[Base] = Registry("widget", Base)
    with pytest.raises(CscoreError, match="is not a Base subclass"):
        reg.register("x")(int)
    reg.register("x")(type("X", (Base,), {}))
    with pytest.raises(CscoreError, match="registered twice") as err:
        reg.register("x")(type("Y", (Base,), {}))
    assert "\n" not in str(err.value)


def test_unknown_name_suggests_the_closest():
    reg: Registry[Base] = Registry("method", Base)
    reg.register("contrast")(type("C", (Base,), {}))
    with pytest.raises(ConfigError) as err:
        reg.get("contrats")
    assert str(err.value) == "unknown method 'contrats' (did you mean contrast?); known: contrast"
    assert err.value.exit_code == 2


def test_suggest_and_unknown_keys():
    assert suggest("gama", ["gamma", "t"], "method.") == " (did you mean method.gamma?)"
    assert suggest("zzz", ["gamma"]) == ""
    assert unknown_keys("method=contrast", ["gama"], ["gamma", "t"], "method.") == (
        "method=contrast: unknown option method.gama (did you mean method.gamma?); allowed: method.gamma, method.t")
