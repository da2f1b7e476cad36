"""``mltk train-continual``: CLL-CLIP, languages learned one after another (TEIR and continual baselines)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, List, Optional

import typer

from mltk.cli.common import (
    LIST_METAVAR,
    either,
    emit,
    examples,
    hidden_alias,
    lang_option,
    out_option,
    require,
    route_input,
    split_list,
)
from mltk.cli.config_options import GivenSettings, training_options
from mltk.cli.options import (
    CacheDirOpt,
    CaptionsOpt,
    DeviceOpt,
    ImagesOpt,
    JsonOpt,
    LogEveryOpt,
    ModelOpt,
    PrecisionOpt,
    PretrainedOpt,
    RecipeOpt,
    TensorboardOpt,
)
from mltk.settings.continual import ContinualTrainConfig

METHOD_HELP = (
    "cll-clip (the table alone), oewc (online EWC), er (experience replay), der (dark experience replay), "
    "mla (adapters per language), lora (q and v, per language), ptuning (prefixes per language), "
    "dualprompt, codaprompt. mla, lora and ptuning are task-specific: each caption uses its language's "
    "set at evaluation (the task identity), as CLL-CLIP ran them. Each method's options (e.g. er "
    "memory_size, lora rank) come from the recipe's methods section (mltk recipes show cll-clip); set one "
    "with --set method.KEY=VALUE."
)

EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-continual --captions world/captions -m runs/native \\",
    "      --lang en,de,zh --teir -o runs/cll",
    "mltk train-continual world/captions -m ./all-MiniLM-L6-v2 \\",
    "      --lang de,fr,zh --teir -o runs/cll-text      # text only: no images",
)


ImagesArg = typer.Argument(
    None,
    metavar="[IMAGES]",
    help="Image embeddings artifact (mltk encode-images), or - / nothing to read its path "
    "from stdin (a captions artifact there is taken as --captions). Left out with a text-only tower (--model a "
    "transformers / sentence-transformers folder): the run trains on text alone.",
)
LangOpt = lang_option(
    "Task languages in training order (repeat or comma-separate); default: en first, then every "
    "other language of the captions (text only: every language but en, the teacher)."
)
OrderOpt = Annotated[
    Optional[str],
    typer.Option(
        "--order",
        help="A published task order shipped with mltk: cll-clip (CLL-CLIP's 36 languages, en first; with "
        "--lang, those languages in this order).",
    ),
]
MethodOpt = Annotated[str, typer.Option("--method", help=METHOD_HELP)]
TeirOpt = Annotated[bool, typer.Option("--teir", help="TEIR: initialisation and regularisation of the token table.")]
TeirInitOnlyOpt = Annotated[bool, typer.Option("--teir-init-only", help="TEIR's initialisation alone (ablation).")]
TeirRegOnlyOpt = Annotated[bool, typer.Option("--teir-reg-only", help="TEIR's regularisation alone (ablation).")]
TeirPartOpt = Annotated[
    List[str],
    typer.Option(
        "--teir-part",
        metavar=LIST_METAVAR,
        help="TEIR's parts one by one (repeat or comma-separate): init "
        "(initialisation), grad (lambda scales the gradient), decay (lambda scales the weight decay); --teir = all "
        "three.",
    ),
]
JointOpt = Annotated[
    bool,
    typer.Option("--joint", help="The upper bound: train every language at once (one task, the oracle vocabulary)."),
]
OracleVocabOpt = Annotated[
    bool,
    typer.Option(
        "--oracle-vocab",
        help="One vocabulary of --vocab-size tokens built from every task's text up front (the "
        "paper's oracle: 200000).",
    ),
]
VocabDirOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--vocab-dir",
        help="Prebuilt vocab artifacts, one per task at DIR/<lang> (mltk build-vocab, each with the "
        "previous task's as --parent); built on the fly when left out.",
    ),
]
ProtectLangOpt = Annotated[
    Optional[str],
    typer.Option("--protect-lang", help="When building vocabularies, keep this language's parent ids (e.g. en)."),
]
ContinualMetricOpt = Annotated[
    Optional[str],
    typer.Option(
        "--continual-metric",
        help="a_{j,i} of the continual matrix: AR or <i2t|t2i>.R@<1|5|10> (default t2i.R@1); "
        "text only, caption-to-caption retrieval against English: <x2en|en2x>.R@<1|5|10> (default x2en.R@1).",
    ),
]
WordpieceGrowthOpt = Annotated[
    str,
    typer.Option(
        "--wordpiece-growth",
        help="A Hugging Face tower's WordPiece growth: keep (new pieces never re-segment a word of "
        "an earlier task's text) or resegment (all of each task's new pieces).",
    ),
]
KeepTaskCheckpointsOpt = Annotated[
    bool, typer.Option("--keep-task-checkpoints", help="Keep each task's checkpoint (tasks/NN-lang) in the artifact.")
]


@training_options("train-continual", ContinualTrainConfig)
def train_continual_command(
    source: Optional[str] = ImagesArg,
    captions: CaptionsOpt = None,
    images: ImagesOpt = None,
    out: Path = out_option("Directory of the checkpoint artifact to write."),
    model: ModelOpt = None,
    pretrained: PretrainedOpt = None,
    lang: List[str] = LangOpt,
    order: OrderOpt = None,
    method: MethodOpt = "cll-clip",
    teir: TeirOpt = False,
    teir_init_only: TeirInitOnlyOpt = False,
    teir_reg_only: TeirRegOnlyOpt = False,
    teir_part: TeirPartOpt = [],
    joint: JointOpt = False,
    oracle_vocab: OracleVocabOpt = False,
    vocab_dir: VocabDirOpt = None,
    protect_lang: ProtectLangOpt = None,
    wordpiece_growth: WordpieceGrowthOpt = "keep",
    recipe: RecipeOpt = None,
    continual_metric: ContinualMetricOpt = None,
    metric_alias: Optional[str] = hidden_alias("--metric"),
    keep_task_checkpoints: KeepTaskCheckpointsOpt = False,
    cache_dir: CacheDirOpt = None,
    device: DeviceOpt = "auto",
    precision: PrecisionOpt = "auto",
    log_every: LogEveryOpt = None,
    tensorboard: TensorboardOpt = None,
    as_json: JsonOpt = False,
    settings: GivenSettings = None,
) -> None:
    """Learn languages one after another with CLL-CLIP: each task grows CLIP's vocabulary and trains the token
    table of the frozen text tower (gamma1 x InfoNCE + gamma2 x MSE to the English teacher). After each task every
    language so far is evaluated; writes a checkpoint with continual.json (matrix, AR, F) and two PNGs. Rerun the same
    command to resume. On a text-only tower (no images) the tower's WordPiece vocabulary grows, the loss is the MSE
    term alone and each language is scored by caption-to-caption retrieval against the frozen tower's English.
    Hyper-parameters: recipe cll-clip (teir-minilm on a text-only tower)."""
    from mltk.data.orders import ordered_subset
    from mltk.present import report
    from mltk.train.continual import final_summary, read_summary, teir_parts, train_continual
    from mltk.train.step_log import step_logging

    routed = route_input(
        source,
        {"image-embeddings": images, "captions": captions},
        default="image-embeddings",
        options={"captions": "--captions", "image-embeddings": "--images"},
    )
    config = ContinualTrainConfig(
        images=routed["image-embeddings"],
        captions=require(routed, "captions", "--captions"),
        out=out,
        model=model,
        pretrained=pretrained,
        method=method,
        joint=joint,
        oracle_vocab=oracle_vocab,
        vocab_dir=vocab_dir,
        languages=split_list(lang) if order is None else ordered_subset(order, split_list(lang)),
        protect_lang=protect_lang,
        wordpiece_growth=wordpiece_growth,
        metric=either(continual_metric, metric_alias, "--continual-metric", "--metric"),
        keep_task_checkpoints=keep_task_checkpoints,
        device=device,
        precision=precision,
        cache_dir=cache_dir,
        recipe=recipe,
        loop=settings.loop,
        **teir_parts(teir, teir_init_only, teir_reg_only, split_list(teir_part)),
        **settings.config,
    )
    with step_logging(log_every, tensorboard):
        path = train_continual(config)
    report.print_metrics({"continual": read_summary(path)})  # the matrix, AR and F on stderr
    emit(path, as_json, **(final_summary(path) if as_json else {}))


def register(app: typer.Typer) -> None:
    app.command("train-continual", epilog=EXAMPLE)(train_continual_command)
