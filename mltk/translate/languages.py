"""Language codes of the translation model families, and which family a model name belongs to.

mltk's captions carry ISO 639-1 codes (``de``, ``fr``). The models want their own codes:

- M2M-100 (Fan et al., 2021) uses ISO 639-1 where one exists plus a few ISO 639-3 codes (``ast``, ``ceb``,
  ``ilo``); the list is fixed by the model's vocabulary (``M2M100_CODES``, copied from fairseq).
- NLLB-200 (NLLB Team, 2022) uses FLORES-200 codes, ISO 639-3 plus script (``deu_Latn``, ``zho_Hans``).
  ``NLLB_CODES`` maps ISO 639-1 to them; where a macrolanguage has several NLLB varieties the table picks the
  one FLORES-200 uses as the standard variety (``ar`` -> Modern Standard Arabic ``arb_Arab``, ``fa`` -> Western
  Persian ``pes_Arab``, ``zh`` -> Simplified Chinese ``zho_Hans``, ``ms`` -> Standard Malay ``zsm_Latn``).
- Marian/OPUS-MT (Tiedemann and Thottingal, 2020) trains one model per language pair, named by ISO codes
  (``Helsinki-NLP/opus-mt-en-de``); multilingual-target OPUS-MT models take a ``>>de<<`` prefix on the source.
"""

from __future__ import annotations

import json
from pathlib import Path

from mltk.core.download import looks_local
from mltk.core.errors import ConfigError

FAMILIES = ("auto", "marian", "m2m100", "nllb", "seq2seq")

# fairseq's M2M-100 language list (the 100 languages of facebook/m2m100_418M and _1.2B).
M2M100_CODES = frozenset(
    "af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl gu ha he hi hr ht "
    "hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml mn mr ms my ne nl no ns oc or pa pl ps "
    "pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl tn tr uk ur uz vi wo xh yi yo zh zu".split()
)

# ISO 639-1 -> FLORES-200 code of NLLB-200. Every value is in NLLB-200's language list (tested).
NLLB_CODES = {
    "af": "afr_Latn", "ak": "aka_Latn", "am": "amh_Ethi", "ar": "arb_Arab", "as": "asm_Beng", "ay": "ayr_Latn",
    "az": "azj_Latn", "ba": "bak_Cyrl", "be": "bel_Cyrl", "bg": "bul_Cyrl", "bm": "bam_Latn", "bn": "ben_Beng",
    "bo": "bod_Tibt", "bs": "bos_Latn", "ca": "cat_Latn", "cs": "ces_Latn", "cy": "cym_Latn", "da": "dan_Latn",
    "de": "deu_Latn", "dz": "dzo_Tibt", "ee": "ewe_Latn", "el": "ell_Grek", "en": "eng_Latn", "eo": "epo_Latn",
    "es": "spa_Latn", "et": "est_Latn", "eu": "eus_Latn", "fa": "pes_Arab", "ff": "fuv_Latn", "fi": "fin_Latn",
    "fj": "fij_Latn", "fo": "fao_Latn", "fr": "fra_Latn", "ga": "gle_Latn", "gd": "gla_Latn", "gl": "glg_Latn",
    "gn": "grn_Latn", "gu": "guj_Gujr", "ha": "hau_Latn", "he": "heb_Hebr", "hi": "hin_Deva", "hr": "hrv_Latn",
    "ht": "hat_Latn", "hu": "hun_Latn", "hy": "hye_Armn", "id": "ind_Latn", "ig": "ibo_Latn", "is": "isl_Latn",
    "it": "ita_Latn", "ja": "jpn_Jpan", "jv": "jav_Latn", "ka": "kat_Geor", "kg": "kon_Latn", "ki": "kik_Latn",
    "kk": "kaz_Cyrl", "km": "khm_Khmr", "kn": "kan_Knda", "ko": "kor_Hang", "ks": "kas_Arab", "ku": "kmr_Latn",
    "ky": "kir_Cyrl", "lb": "ltz_Latn", "lg": "lug_Latn", "li": "lim_Latn", "ln": "lin_Latn", "lo": "lao_Laoo",
    "lt": "lit_Latn", "lv": "lvs_Latn", "mg": "plt_Latn", "mi": "mri_Latn", "mk": "mkd_Cyrl", "ml": "mal_Mlym",
    "mn": "khk_Cyrl", "mr": "mar_Deva", "ms": "zsm_Latn", "mt": "mlt_Latn", "my": "mya_Mymr", "nb": "nob_Latn",
    "ne": "npi_Deva", "nl": "nld_Latn", "nn": "nno_Latn", "no": "nob_Latn", "ny": "nya_Latn", "oc": "oci_Latn",
    "om": "gaz_Latn", "or": "ory_Orya", "pa": "pan_Guru", "pl": "pol_Latn", "ps": "pbt_Arab", "pt": "por_Latn",
    "qu": "quy_Latn", "rn": "run_Latn", "ro": "ron_Latn", "ru": "rus_Cyrl", "rw": "kin_Latn", "sa": "san_Deva",
    "sc": "srd_Latn", "sd": "snd_Arab", "sg": "sag_Latn", "si": "sin_Sinh", "sk": "slk_Latn", "sl": "slv_Latn",
    "sm": "smo_Latn", "sn": "sna_Latn", "so": "som_Latn", "sq": "als_Latn", "sr": "srp_Cyrl", "ss": "ssw_Latn",
    "st": "sot_Latn", "su": "sun_Latn", "sv": "swe_Latn", "sw": "swh_Latn", "ta": "tam_Taml", "te": "tel_Telu",
    "tg": "tgk_Cyrl", "th": "tha_Thai", "ti": "tir_Ethi", "tk": "tuk_Latn", "tl": "tgl_Latn", "tn": "tsn_Latn",
    "tr": "tur_Latn", "ts": "tso_Latn", "tt": "tat_Cyrl", "ug": "uig_Arab", "uk": "ukr_Cyrl", "ur": "urd_Arab",
    "uz": "uzn_Latn", "vi": "vie_Latn", "wo": "wol_Latn", "xh": "xho_Latn", "yi": "ydd_Hebr", "yo": "yor_Latn",
    "zh": "zho_Hans", "zu": "zul_Latn",
}  # fmt: skip

_TOKENIZER_FAMILIES = {
    "MarianTokenizer": "marian",
    "M2M100Tokenizer": "m2m100",
    "NllbTokenizer": "nllb",
    "NllbTokenizerFast": "nllb",
}
_MODEL_TYPE_FAMILIES = {"marian": "marian", "m2m_100": "m2m100"}


def fill_model_name(template: str, source_lang: str, target_lang: str) -> str:
    """``Helsinki-NLP/opus-mt-{src}-{tgt}`` -> ``Helsinki-NLP/opus-mt-en-de`` (one Marian model per pair)."""
    return template.replace("{src}", source_lang).replace("{tgt}", target_lang)


def is_local_model(name: str) -> bool:
    """A local directory (or something spelled like a path) rather than a Hugging Face Hub id."""
    return Path(name).expanduser().exists() or looks_local(name)


def detect_family(name: str) -> str:
    """The model family of a model name or local directory, read from its files when local, else from the name.

    Local: ``tokenizer_config.json``'s ``tokenizer_class`` (NLLB shares M2M-100's ``model_type``, so the
    tokenizer decides), then ``config.json``'s ``model_type``. Hub ids: ``nllb``, ``m2m100`` or
    ``opus-mt``/``marian`` in the name. Anything else is a plain ``seq2seq`` model without language codes.
    """
    path = Path(name).expanduser()
    if path.is_dir():
        tokenizer_class = _read_json_field(path / "tokenizer_config.json", "tokenizer_class")
        if tokenizer_class in _TOKENIZER_FAMILIES:
            return _TOKENIZER_FAMILIES[tokenizer_class]
        model_type = _read_json_field(path / "config.json", "model_type")
        if model_type in _MODEL_TYPE_FAMILIES:
            return _MODEL_TYPE_FAMILIES[model_type]
        return "seq2seq"
    lowered = name.lower()
    if "nllb" in lowered:
        return "nllb"
    if "m2m100" in lowered or "m2m_100" in lowered:
        return "m2m100"
    if "opus-mt" in lowered or "marian" in lowered:
        return "marian"
    return "seq2seq"


def _read_json_field(path: Path, field: str) -> str | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get(field)
    except (OSError, ValueError, AttributeError):
        return None


def model_language_code(family: str, iso_code: str) -> str:
    """The code the model family uses for ISO 639-1 ``iso_code``; ``ConfigError`` when it has none."""
    if family == "nllb":
        if iso_code not in NLLB_CODES:
            raise ConfigError(
                f"language {iso_code!r} has no NLLB-200 code in mltk's ISO 639-1 table "
                f"(known: {', '.join(sorted(NLLB_CODES))})"
            )
        return NLLB_CODES[iso_code]
    if family == "m2m100":
        if iso_code not in M2M100_CODES:
            raise ConfigError(
                f"language {iso_code!r} is not one of M2M-100's languages (known: {', '.join(sorted(M2M100_CODES))})"
            )
        return iso_code
    return iso_code


def check_language_code(code: str, option: str) -> str:
    """Lower-case ``code`` and insist on the shape of an ISO 639-1 (two letters) or 639-3 (three) code."""
    normalized = code.strip().lower()
    if not (2 <= len(normalized) <= 3 and normalized.isascii() and normalized.isalpha()):
        raise ConfigError(f"{option} {code!r} is not an ISO 639-1 language code such as 'de'")
    return normalized
