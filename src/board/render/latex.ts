/**
 * A plain-text approximation of LaTeX for the server-side preview, which has
 * no TeX engine: Greek letters and common symbols become Unicode, ^2 and _1
 * become super/subscripts where Unicode has them, \frac{a}{b} becomes (a)/(b).
 * The page itself renders formulas with KaTeX; a thumbnail only needs to be
 * recognisable (docs/board.md, "Preview").
 */
const SYMBOLS: Record<string, string> = {
  alpha: 'α', beta: 'β', gamma: 'γ', delta: 'δ', epsilon: 'ε', varepsilon: 'ε', zeta: 'ζ', eta: 'η', theta: 'θ',
  iota: 'ι', kappa: 'κ', lambda: 'λ', mu: 'μ', nu: 'ν', xi: 'ξ', pi: 'π', rho: 'ρ', sigma: 'σ', tau: 'τ',
  upsilon: 'υ', phi: 'φ', varphi: 'φ', chi: 'χ', psi: 'ψ', omega: 'ω', Gamma: 'Γ', Delta: 'Δ', Theta: 'Θ',
  Lambda: 'Λ', Xi: 'Ξ', Pi: 'Π', Sigma: 'Σ', Phi: 'Φ', Psi: 'Ψ', Omega: 'Ω',
  cdot: '·', times: '×', div: '÷', pm: '±', mp: '∓', le: '≤', leq: '≤', ge: '≥', geq: '≥', ne: '≠', neq: '≠',
  approx: '≈', equiv: '≡', sim: '∼', infty: '∞', partial: '∂', nabla: '∇', sum: '∑', prod: '∏', int: '∫',
  oint: '∮', sqrt: '√', to: '→', rightarrow: '→', leftarrow: '←', Rightarrow: '⇒', Leftrightarrow: '⇔',
  in: '∈', notin: '∉', subset: '⊂', subseteq: '⊆', cup: '∪', cap: '∩', forall: '∀', exists: '∃', angle: '∠',
  perp: '⊥', parallel: '∥', degree: '°', circ: '∘', ldots: '…', cdots: '⋯', hbar: 'ħ', emptyset: '∅',
  sin: 'sin', cos: 'cos', tan: 'tan', log: 'log', ln: 'ln', lim: 'lim', exp: 'exp',
  quad: '  ', qquad: '    ', ',': ' ', ';': ' ', '!': '', ' ': ' ', '{': '{', '}': '}', '%': '%',
  left: '', right: '', displaystyle: '', mathrm: '', text: '', mathbf: '', vec: '', overline: '', hat: '',
};
const SUP: Record<string, string> = { '0': '⁰', '1': '¹', '2': '²', '3': '³', '4': '⁴', '5': '⁵', '6': '⁶', '7': '⁷', '8': '⁸', '9': '⁹', '+': '⁺', '-': '⁻', '=': '⁼', '(': '⁽', ')': '⁾', n: 'ⁿ', i: 'ⁱ' };
const SUB: Record<string, string> = { '0': '₀', '1': '₁', '2': '₂', '3': '₃', '4': '₄', '5': '₅', '6': '₆', '7': '₇', '8': '₈', '9': '₉', '+': '₊', '-': '₋', '=': '₌', '(': '₍', ')': '₎' };

/** The content of a {group} starting at s[i] === '{', and the index after it. */
function group(s: string, i: number): [string, number] {
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    if (s[j] === '{') depth++;
    else if (s[j] === '}' && --depth === 0) return [s.slice(i + 1, j), j + 1];
  }
  return [s.slice(i + 1), s.length];
}

function script(text: string, table: Record<string, string>, mark: string): string {
  const plain = latexToText(text);
  return [...plain].every((c) => table[c]) ? [...plain].map((c) => table[c]).join('') : `${mark}(${plain})`;
}

export function latexToText(src: string): string {
  let out = '';
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === '\\') {
      const m = /^\\([A-Za-z]+|.)/.exec(src.slice(i));
      const name = m ? m[1] : '';
      i += m ? m[0].length : 1;
      if (name === 'frac' && src[i] === '{') {
        const [a, j] = group(src, i);
        const [b, k] = src[j] === '{' ? group(src, j) : ['', j];
        const wrap = (t: string) => (t.length > 1 ? `(${t})` : t);
        out += `${wrap(latexToText(a))}/${wrap(latexToText(b))}`;
        i = k;
      } else if (name === 'sqrt' && src[i] === '{') {
        const [a, j] = group(src, i);
        out += `√(${latexToText(a)})`;
        i = j;
      } else {
        out += SYMBOLS[name] ?? name;
      }
    } else if ((c === '^' || c === '_') && i + 1 < src.length) {
      let arg: string;
      if (src[i + 1] === '{') [arg, i] = group(src, i + 1);
      else [arg, i] = [src[i + 1], i + 2];
      out += c === '^' ? script(arg, SUP, '^') : script(arg, SUB, '_');
    } else if (c === '{' || c === '}') {
      i++;
    } else {
      out += c;
      i++;
    }
  }
  return out.replace(/\s+/g, ' ').trim();
}
