/**
 * The `keys --detect` command an operator should run for `model`, naming the router's own config
 * file when it was started from one (a placeholder otherwise, e.g. under tests or embedding).
 */
export function detectCommand(model: string, configPath: string | undefined): string {
  const config = configPath ? shellWord(configPath) : "<config file>";
  return `npx -y deno@2.9.6 task keys --detect --config ${config} --model ${shellWord(model)}`;
}

/** As is when the shell would read it as one word, else quoted. */
function shellWord(value: string): string {
  return /^[A-Za-z0-9_.\/:@+=-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}
