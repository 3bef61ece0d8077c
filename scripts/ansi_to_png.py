#!/usr/bin/env python3
"""Render a terminal capture with SGR escapes (`tmux capture-pane -e -p`) to a PNG.

    ansi_to_png.py CAPTURE.txt OUT.png --cols 140 --rows 40 [--font-size 15]

Every cell is drawn on a fixed grid with DejaVu Sans Mono (fonts-dejavu-core), regular or
bold: foreground, background, bold, dim, italic (drawn upright), underline and reverse; the 16
xterm colours, the 256-colour palette and 24-bit colour. Only Pillow is needed.
"""

import argparse
import re
import sys
import unicodedata

from PIL import Image, ImageDraw, ImageFont

FONT_DIR = "/usr/share/fonts/truetype/dejavu"
BACKGROUND = (24, 26, 31)
FOREGROUND = (214, 216, 222)
# The 16 base colours (a dark-background xterm-like palette).
BASE16 = [
    (30, 32, 38), (224, 82, 82), (108, 190, 108), (222, 186, 72),
    (92, 142, 230), (196, 112, 214), (72, 190, 200), (200, 204, 212),
    (110, 116, 128), (255, 120, 120), (140, 222, 140), (250, 216, 110),
    (130, 172, 255), (226, 146, 240), (110, 222, 232), (250, 250, 252),
]
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
OTHER_ESCAPE = re.compile(r"\x1b(\[[0-9;?]*[A-Za-ln-z]|\][^\x07]*\x07|[()][0-9A-Za-z])")


def palette(n):
    """xterm 256-colour palette."""
    if n < 16:
        return BASE16[n]
    if n < 232:
        n -= 16
        steps = [0, 95, 135, 175, 215, 255]
        return (steps[n // 36], steps[(n // 6) % 6], steps[n % 6])
    level = 8 + (n - 232) * 10
    return (level, level, level)


class Style:
    def __init__(self):
        self.reset()

    def reset(self):
        self.fg = None
        self.bg = None
        self.bold = False
        self.dim = False
        self.underline = False
        self.reverse = False

    def copy(self):
        other = Style()
        other.__dict__.update(self.__dict__)
        return other

    def apply(self, params):
        codes = [int(p) if p else 0 for p in re.split("[;:]", params)] if params else [0]
        i = 0
        while i < len(codes):
            c = codes[i]
            if c == 0:
                self.reset()
            elif c == 1:
                self.bold = True
            elif c == 2:
                self.dim = True
            elif c == 4:
                self.underline = True
            elif c == 7:
                self.reverse = True
            elif c == 22:
                self.bold = self.dim = False
            elif c == 24:
                self.underline = False
            elif c == 27:
                self.reverse = False
            elif 30 <= c <= 37:
                self.fg = BASE16[c - 30]
            elif 90 <= c <= 97:
                self.fg = BASE16[c - 90 + 8]
            elif c == 39:
                self.fg = None
            elif 40 <= c <= 47:
                self.bg = BASE16[c - 40]
            elif 100 <= c <= 107:
                self.bg = BASE16[c - 100 + 8]
            elif c == 49:
                self.bg = None
            elif c in (38, 48) and i + 1 < len(codes):
                if codes[i + 1] == 5 and i + 2 < len(codes):
                    colour = palette(codes[i + 2])
                    i += 2
                elif codes[i + 1] == 2 and i + 4 < len(codes):
                    colour = tuple(codes[i + 2:i + 5])
                    i += 4
                else:
                    colour = None
                if c == 38:
                    self.fg = colour
                else:
                    self.bg = colour
            i += 1

    def colours(self):
        fg = self.fg or FOREGROUND
        bg = self.bg or BACKGROUND
        if self.reverse:
            fg, bg = bg, fg
        if self.dim:
            fg = tuple((a + b) // 2 for a, b in zip(fg, bg))
        return fg, bg


def cells(line):
    """(char, style, width) per character of one captured line."""
    style = Style()
    out = []
    line = OTHER_ESCAPE.sub("", line)
    pos = 0
    for m in SGR.finditer(line):
        for ch in line[pos:m.start()]:
            out.append((ch, style.copy()))
        style.apply(m.group(1))
        pos = m.end()
    for ch in line[pos:]:
        out.append((ch, style.copy()))
    result = []
    for ch, st in out:
        if ch in "\r\n" or unicodedata.combining(ch):
            continue
        width = 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        result.append((ch, st, width))
    return result


def render(text, cols, rows, size):
    regular = ImageFont.truetype(f"{FONT_DIR}/DejaVuSansMono.ttf", size)
    bold = ImageFont.truetype(f"{FONT_DIR}/DejaVuSansMono-Bold.ttf", size)
    ascent, descent = regular.getmetrics()
    cw = round(regular.getlength("M"))
    ch = ascent + descent
    pad = 12
    image = Image.new("RGB", (cols * cw + 2 * pad, rows * ch + 2 * pad), BACKGROUND)
    draw = ImageDraw.Draw(image)
    lines = text.split("\n")
    for y, line in enumerate(lines[:rows]):
        x = 0
        for char, style, width in cells(line):
            if x >= cols:
                break
            fg, bg = style.colours()
            left, top = pad + x * cw, pad + y * ch
            if bg != BACKGROUND:
                draw.rectangle([left, top, left + width * cw - 1, top + ch - 1], fill=bg)
            if char != " ":
                font = bold if style.bold else regular
                draw.text((left, top), char, font=font, fill=fg)
            if style.underline:
                draw.line([left, top + ch - 2, left + width * cw - 1, top + ch - 2], fill=fg)
            x += width
    return image


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture")
    parser.add_argument("output")
    parser.add_argument("--cols", type=int, default=140)
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--font-size", type=int, default=15)
    args = parser.parse_args()
    with open(args.capture, encoding="utf-8", errors="replace") as f:
        text = f.read()
    render(text, args.cols, args.rows, args.font_size).save(args.output, optimize=True)
    print(f"wrote {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
