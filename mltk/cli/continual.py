"""``mltk train-continual``: CLL-CLIP, languages learned one after another (TEIR and continual baselines)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import List, Optional

import typer

from mltk.cli.common import (LIST_METAVAR, CacheDirOption, DeviceOption, JsonOption, LogEveryOption,
                              PrecisionOption, SeedOption, TensorboardOption, either, emit, examples, hidden_alias,
                              lang_option, out_option, require, route_input, split_list)

METHOD_HELP = ("cll-clip (the table alone), oewc (online EWC), er (experience replay), der (dark experience replay), "
               "mla (adapters per language), lora (q and v, per language), ptuning (prefixes per language), "
               "dualprompt, codaprompt. mla, lora and ptuning are task-specific: each caption uses its language's "
               "set at evaluation (the task identity), as CLL-CLIP ran them.")
# Kept in step with each method's Options dataclass by tests/test_continual_fidelity.py (importing them here
# would load torch for every CLI call).
OPTIONS_HELP = ("Keys: oewc penalty, gamma, fisher_batches, half; er memory_size, replay_batch, replay_loss "
                "(joint|separate); der memory_size, replay_batch, replay_loss, alpha; mla reduction, position "
                "(block|mlp), init (bert|zero); lora rank, alpha, dropout, targets; ptuning length, bottleneck, "
                "separate_kv, layer_norm; dualprompt g_length, e_length, g_layers, e_layers, pool, pull_weight, "
                "key_init (uniform|mean), candidates (all|trained); codaprompt components, length, layers, tasks. "
                "Defaults and sources: docs/fidelity.md.")

EXAMPLE = examples(
    "mltk encode-images world/images -m runs/native -o emb \\",
    "  | mltk train-continual --captions world/captions -m runs/native \\",
    "      --lang en,de,zh --teir -o runs/cll",
    "mltk train-continual world/captions -m ./all-MiniLM-L6-v2 \\",
    "      --lang de,fr,cs --teir -o runs/cll-text      # text only: no images")


def train_continual_command(
    source: Optional[str] = typer.Argument(
        None, metavar="[IMAGES]", help="Image embeddings artifact (mltk encode-images), or - / nothing to read its "
        "path from stdin (a captions artifact there is taken as --captions). Left out with a text-only tower "
        "(--model a transformers / sentence-transformers folder): the run trains on text alone."),
    captions: Optional[Path] = typer.Option(None, "--captions", help="Captions artifact; parallel captions share "
                                            "caption_id (the English one is each caption's teacher)."),
    images: Optional[Path] = typer.Option(None, "--images", help="Image embeddings, instead of the positional."),
    out: Path = out_option("Directory of the checkpoint artifact to write."),
    model: str = typer.Option(
        "mltk-tiny", "--model", "-m", help="Frozen base CLIP: open_clip name (with --pretrained) or a checkpoint "
        "artifact from `mltk pretrain`; or a text-only transformers / sentence-transformers folder with a WordPiece "
        "tokenizer (e.g. all-MiniLM-L6-v2), whose vocabulary is grown instead of CLIP's BPE."),
    pretrained: Optional[str] = typer.Option(None, "--pretrained", help="open_clip pretrained tag for --model."),
    lang: List[str] = lang_option(
        "Task languages in training order (repeat or comma-separate); default: en first, then every other "
        "language of the captions (text only: every language but en, the teacher)."),
    order: Optional[str] = typer.Option(
        None, "--order", help="A published task order shipped with mltk: cll-clip (CLL-CLIP's 36 languages, en "
        "first; with --lang, those languages in this order)."),
    method: str = typer.Option("cll-clip", "--method", help=METHOD_HELP),
    teir: bool = typer.Option(False, "--teir", help="TEIR: initialisation and regularisation of the token table."),
    teir_init_only: bool = typer.Option(False, "--teir-init-only", help="TEIR's initialisation alone (ablation)."),
    teir_reg_only: bool = typer.Option(
        False, "--teir-reg-only", help="TEIR's regularisation alone (ablation)."),
    teir_part: List[str] = typer.Option(
        [], "--teir-part", metavar=LIST_METAVAR, help="TEIR's parts one by one (repeat or comma-separate): init (initialisation), grad "
        "(lambda scales the gradient), decay (lambda scales the weight decay); --teir = all three."),
    token_sets: str = typer.Option(
        "occurrence", "--token-sets", help="TEIR's token sets: occurrence (tokens in the task's text, the authors' "
        "code) or vocabulary (tokens of the task's new vocabulary, the paper's wording)."),
    joint: bool = typer.Option(
        False, "--joint", help="The upper bound: train every language at once (one task, the oracle vocabulary)."),
    oracle_vocab: bool = typer.Option(
        False, "--oracle-vocab", help="One vocabulary of --vocab-size tokens built from every task's text up front "
        "(the paper's oracle: 200000)."),
    vocab_dir: Optional[Path] = typer.Option(
        None, "--vocab-dir", help="Prebuilt vocab artifacts, one per task at DIR/<lang> (mltk build-vocab, each "
        "with the previous task's as --parent); built on the fly when left out."),
    vocab_size: int = typer.Option(10000, "--vocab-size", help="Tokens of each task's new vocabulary V̂."),
    protect_lang: Optional[str] = typer.Option(
        None, "--protect-lang", help="When building vocabularies, keep this language's parent ids (e.g. en)."),
    wordpiece_growth: str = typer.Option(
        "keep", "--wordpiece-growth", help="A Hugging Face tower's WordPiece growth: keep (new pieces never "
        "re-segment a word of an earlier task's text) or resegment (all of each task's new pieces)."),
    epochs: int = typer.Option(3, "--epochs", help="Epochs per task (an epoch = one pass over its captions, or "
                               "over its images with --epoch-unit images)."),
    epoch_unit: str = typer.Option(
        "captions", "--epoch-unit", help="captions (the authors': every caption once per epoch) or images (every "
        "image once, one of its captions drawn)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Updates per task (overrides --epochs)."),
    eval_every: Optional[int] = typer.Option(
        None, "--eval-every", help="Validate every N steps (default: every epoch); the best one is kept."),
    batch_size: int = typer.Option(128, "--batch-size", help="Distinct images per batch."),
    lr: float = typer.Option(5e-5, "--lr", help="Learning rate of the table and temperature (AdamW)."),
    method_lr: Optional[float] = typer.Option(
        None, "--method-lr", help="Learning rate of the method's own tensors (adapters, LoRA, prompts); default: "
        "--lr, as the paper trains everything at 5e-5."),
    warmup: float = typer.Option(0.1, "--warmup", help="Fraction of each task's steps of linear warm-up."),
    weight_decay: float = typer.Option(0.05, "--weight-decay", help="Decoupled weight decay."),
    gamma1: Optional[float] = typer.Option(
        None, "--gamma1", help="Weight of the image-text InfoNCE term (default 0.01; 0 and off in a text-only run, "
        "which has no images)."),
    gamma2: float = typer.Option(1.0, "--gamma2", help="Weight of the MSE to the English teacher."),
    mse_form: str = typer.Option(
        "mean", "--mse-form", help="The MSE term: mean over elements (the authors' code) or sum (over D, the "
        "written form)."),
    continual_metric: Optional[str] = typer.Option(
        None, "--continual-metric", help="a_{j,i} of the continual matrix: AR or <i2t|t2i>.R@<1|5|10> (default "
        "t2i.R@1); text only, caption-to-caption retrieval against English: <x2en|en2x>.R@<1|5|10> (default x2en.R@1)."),
    metric_alias: Optional[str] = hidden_alias("--metric"),
    method_option: List[str] = typer.Option(
        [], "--method-option", metavar=LIST_METAVAR, help="The method's hyper-parameters as key=value (repeat or comma-separate; block "
        "lists as 2+3+4 or 2-4), checked against the method's options; defaults are the CLL-CLIP authors' values. "
        + OPTIONS_HELP),
    keep_task_checkpoints: bool = typer.Option(
        False, "--keep-task-checkpoints", help="Keep each task's checkpoint (tasks/NN-lang) in the artifact."),
    val_images: int = typer.Option(1000, "--val-images", help="At most this many validation images."),
    cache_dir: Optional[Path] = CacheDirOption,
    device: str = DeviceOption,
    precision: str = PrecisionOption,
    seed: int = SeedOption,
    log_every: Optional[int] = LogEveryOption,
    tensorboard: Optional[Path] = TensorboardOption,
    as_json: bool = JsonOption,
) -> None:
    """Learn languages one after another with CLL-CLIP: each task grows CLIP's vocabulary and trains the token
    table of the frozen text tower (0.01 x InfoNCE + MSE to the English teacher). After each task every language
    so far is evaluated; writes a checkpoint with continual.json (matrix, AR, F) and two PNGs. Rerun the same
    command to resume. On a text-only tower (no images) the tower's WordPiece vocabulary grows, the loss is the MSE
    term alone and each language is scored by caption-to-caption retrieval against the frozen tower's English."""
    from mltk.present import report
    from mltk.cll_clip import method_options
    from mltk.data.orders import ordered_subset
    from mltk.train.continual import (CONTINUAL_LOOP, ContinualTrainConfig, final_summary, read_summary, teir_parts,
                                      train_continual)
    from mltk.train.step_log import step_logging

    metric = either(continual_metric, metric_alias, "--continual-metric", "--metric")
    parts = teir_parts(teir, teir_init_only, teir_reg_only, split_list(teir_part))
    options = method_options(method, method_option)
    languages = split_list(lang) if order is None else ordered_subset(order, split_list(lang))
    routed = route_input(source, {"image-embeddings": images, "captions": captions}, default="image-embeddings",
                         options={"captions": "--captions", "image-embeddings": "--images"})
    config = ContinualTrainConfig(
        images=routed["image-embeddings"], captions=require(routed, "captions", "--captions"),
        out=out, model=model, pretrained=pretrained, languages=languages, method=method, **parts,
        token_sets=token_sets, joint=joint, oracle_vocab=oracle_vocab, epoch_unit=epoch_unit, mse_form=mse_form,
        vocab_dir=vocab_dir, vocab_size=vocab_size, protect_lang=protect_lang, wordpiece_growth=wordpiece_growth,
        epochs=epochs, steps=steps, eval_every=eval_every, batch_size=batch_size, method_lr=method_lr,
        gamma1=gamma1, gamma2=gamma2, metric=metric, val_images=val_images, options=options,
        keep_task_checkpoints=keep_task_checkpoints, device=device, precision=precision, cache_dir=cache_dir,
        loop=replace(CONTINUAL_LOOP, lr=lr, warmup_fraction=warmup, weight_decay=weight_decay, seed=seed))
    with step_logging(log_every, tensorboard):
        path = train_continual(config)
    report.print_metrics({"continual": read_summary(path)})  # the matrix, AR and F on stderr
    emit(path, as_json, **(final_summary(path) if as_json else {}))


def register(app: typer.Typer) -> None:
    app.command("train-continual", epilog=EXAMPLE)(train_continual_command)
