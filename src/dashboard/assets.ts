/**
 * The page's static files, embedded in the module graph as text (no build step, nothing read
 * from disk at run time, so `deno compile` and remote imports carry them too).
 */
import html from "./dashboard.html" with { type: "text" };
import css from "./dashboard.css" with { type: "text" };
import js from "./dashboard.js" with { type: "text" };
import viewJs from "./dashboard_view.js" with { type: "text" };

export const dashboardHtml: string = html;
export const dashboardCss: string = css;
export const dashboardJs: string = js;
/** Served beside the page script, which imports it as `./dashboard_view.js`. */
export const dashboardViewJs: string = viewJs;
