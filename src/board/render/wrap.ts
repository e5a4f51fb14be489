/**
 * A shape's label is stored as typed (docs/snapshot-format.md, `container_id`): the editor wrapped it
 * to the shape, the stored text has no such line breaks. The preview wraps it again, at word
 * boundaries, to the label's stored `width` (the box the author's editor wrapped it into), so a long
 * label stays inside its shape instead of running across the picture.
 *
 * Measured with the advance widths of the preview's sans font: Liberation Sans is metric-compatible
 * with Arial/Helvetica, whose widths (per 1,000 em) for printable ASCII are below; any other
 * character counts 0.6 em. The preview draws every text in that font, whatever the hand-drawn font
 * the board shows, so its lines can break a word earlier or later than the screens'.
 */
const ASCII_WIDTHS = [
  278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278, // space ! " # $ % & ' ( ) * + , - . /
  556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556, // 0-9 : ; < = > ?
  1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778, // @ A-O
  667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556, // P-Z [ \ ] ^ _
  333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556, // ` a-o
  556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584, // p-z { | } ~
];
const OTHER_EM = 0.6;

/** The width of a line in em of the preview's sans font. */
export function textWidthEm(line: string): number {
  let w = 0;
  for (let i = 0; i < line.length; i++) {
    const c = line.charCodeAt(i);
    if (c >= 0xdc00 && c <= 0xdfff) continue; // the second half of a pair: counted with the first
    w += c >= 32 && c <= 126 ? ASCII_WIDTHS[c - 32] / 1000 : OTHER_EM;
  }
  return w;
}

/**
 * The lines of `text` wrapped at spaces so each is at most `width` wide at `size` (a word longer than
 * that keeps a line of its own). Stops after `maxLines` lines: the rest cannot show anyway. Each
 * character is measured once, so a 10,000-character label costs no more than drawing it.
 */
export function wrapLines(text: string, width: number, size: number, maxLines: number): string[] {
  const max = width / size + 0.05; // the author's widest line, measured in the hand font, fits
  const space = textWidthEm(' ');
  const out: string[] = [];
  for (const para of text.split('\n')) {
    let line = '';
    let lineW = 0;
    for (const word of para.split(' ')) {
      const w = textWidthEm(word);
      if (line && lineW + space + w > max) {
        out.push(line);
        if (out.length >= maxLines) return out;
        line = word;
        lineW = w;
      } else {
        line = line ? `${line} ${word}` : word;
        lineW = lineW ? lineW + space + w : w;
      }
    }
    out.push(line);
    if (out.length >= maxLines) return out;
  }
  return out;
}
