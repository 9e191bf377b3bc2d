// Every pairing of a text colour with the background it is drawn on, in both themes, reaches
// WCAG 2.1's 4.5:1 for text (3:1 for the chart's lines, which are not text). The colours are read
// from styles.css itself, so a change there is checked here.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const css = readFileSync(path.join(__dirname, 'styles.css'), 'utf8');

function variables(block: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of block.matchAll(/--([a-z0-9-]+):\s*(#[0-9a-f]{3,6})\s*;/gi)) out[m[1]] = m[2].toLowerCase();
  return out;
}

const light = variables(css.slice(css.indexOf(':root {'), css.indexOf('}', css.indexOf(':root {'))));
const darkStart = css.indexOf('@media (prefers-color-scheme: dark)');
const dark = { ...light, ...variables(css.slice(darkStart, css.indexOf('}\n}', darkStart))) };

function luminance(hex: string): number {
  const h = hex.length === 4 ? hex.replace(/^#(.)(.)(.)$/, '#$1$1$2$2$3$3') : hex;
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16) / 255).map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4));
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

export function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}

// [foreground, background]: a variable name, or a literal colour.
const TEXT: Array<[string, string]> = [
  ['text', 'bg'], ['text', 'surface'], ['text', 'surface-2'], ['text', 'hover'], ['text', 'selected'],
  ['text', 'input-bg'], ['text', 'code-bg'], ['text', 'info-bg'],
  ['muted', 'bg'], ['muted', 'surface'], ['muted', 'surface-2'], ['muted', 'code-bg'],
  ['link', 'bg'], ['link', 'surface'], ['link', 'surface-2'],
  ['ok-fg', 'ok-bg'], ['ok-fg', 'surface'], ['warn-fg', 'warn-bg'], ['warn-fg', 'surface'],
  ['bad-fg', 'bad-bg'], ['bad-fg', 'surface'], ['neutral-fg', 'neutral-bg'],
  ['#ffffff', 'primary'], ['#ffffff', 'primary-hover'], ['#ffffff', 'danger'], ['#ffffff', 'danger-hover'], ['#ffffff', 'topbar-bg'],
];
const LINES: Array<[string, string]> = [
  ['chart-events', 'surface'], ['chart-alerts', 'surface'], ['focus', 'surface'], ['focus', 'bg'],
];

describe.each([
  ['light', light],
  ['dark', dark],
])('contrast in the %s theme', (_theme, vars) => {
  const colour = (v: string) => (v.startsWith('#') ? v : vars[v]);
  it.each(TEXT)('%s on %s reaches 4.5:1', (fg, bg) => {
    expect(colour(fg), `--${fg} is defined`).toBeTruthy();
    expect(colour(bg), `--${bg} is defined`).toBeTruthy();
    expect(contrast(colour(fg), colour(bg))).toBeGreaterThanOrEqual(4.5);
  });
  it.each(LINES)('%s on %s reaches 3:1', (fg, bg) => {
    expect(colour(fg), `--${fg} is defined`).toBeTruthy();
    expect(contrast(colour(fg), colour(bg))).toBeGreaterThanOrEqual(3);
  });
});

it('computes WCAG contrast as the specification does', () => {
  expect(contrast('#000000', '#ffffff')).toBeCloseTo(21, 5);
  expect(contrast('#777777', '#ffffff')).toBeCloseTo(4.48, 2);
});
