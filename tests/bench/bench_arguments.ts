/** A benchmark that takes no arguments: `--help` prints its usage; anything else is refused. */
export function takeNoArguments(usage: string, args: readonly string[] = Deno.args): void {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(usage);
    Deno.exit(0);
  }
  if (args.length > 0) {
    console.error(`unknown arguments: ${args.join(" ")}\n\n${usage}`);
    Deno.exit(2);
  }
}
