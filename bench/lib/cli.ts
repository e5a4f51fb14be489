import { parseArgs } from 'node:util';

/**
 * The command line of a bench program, with its usage. Each option and
 * environment variable carries its meaning beside its default, so `--help`
 * prints what the program reads and the two cannot drift apart.
 */
type Option = { type: 'string' | 'boolean'; default?: string | boolean; short?: string; help: string };
type Plain<O extends Record<string, Option>> = { [K in keyof O]: Omit<O[K], 'help'> };
type EnvVar = { default?: string; help: string };

const wantsHelp = () => process.argv.slice(2).some((a) => a === '--help' || a === '-h');

function usage(about: string, options: Record<string, Option>, vars: Record<string, EnvVar>): string {
  const lines = [about];
  const withDefault = (help: string, d: unknown) => `${help}${d === undefined || d === false ? '' : ` (default: ${String(d)})`}`;
  if (Object.keys(options).length > 0) {
    lines.push('', 'Options:');
    for (const [name, o] of Object.entries(options)) {
      const flag = `${o.short ? `-${o.short}, ` : ''}--${name}${o.type === 'string' ? ' <value>' : ''}`;
      lines.push(`  ${flag.padEnd(28)} ${withDefault(o.help, o.default)}`);
    }
  }
  if (Object.keys(vars).length > 0) {
    lines.push('', 'Environment:');
    for (const [name, v] of Object.entries(vars)) lines.push(`  ${name.padEnd(28)} ${withDefault(v.help, v.default)}`);
  }
  return lines.join('\n');
}

/**
 * `parseArgs` over `options`, and the `environment` variables with their
 * defaults; `--help` (or `-h`) prints `about` and all of them, then exits 0.
 */
export function commandLine<O extends Record<string, Option>, V extends Record<string, EnvVar> = Record<never, EnvVar>>(
  about: string,
  options: O,
  opts: { allowPositionals?: boolean; environment?: V } = {},
) {
  const vars = opts.environment ?? ({} as V);
  if (wantsHelp()) {
    console.log(usage(about, options, vars));
    process.exit(0);
  }
  const plain = Object.fromEntries(Object.entries(options).map(([k, { help: _help, ...o }]) => [k, o])) as Plain<O>;
  const parsed = parseArgs({ options: plain, allowPositionals: opts.allowPositionals ?? false });
  const env = Object.fromEntries(Object.entries(vars).map(([name, v]) => [name, process.env[name] ?? v.default])) as { [K in keyof V]: string | undefined };
  return { ...parsed, env };
}

/** A program configured by the environment only: `commandLine` without options. */
export function environment<V extends Record<string, EnvVar>>(about: string, vars: V): { [K in keyof V]: string | undefined } {
  return commandLine(about, {}, { environment: vars }).env;
}
