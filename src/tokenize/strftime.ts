/**
 * Python's `datetime.strftime` in the C locale, for the `strftime_now` chat-template helper
 * (Llama 3.x templates print today's date into the system prompt). Formats in UTC, the usual
 * clock of an engine container. Pure: the date comes in.
 */

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
const MONTHS = [
  "January",
  "February",
  "March",
  "April",
  "May",
  "June",
  "July",
  "August",
  "September",
  "October",
  "November",
  "December",
];

function pad(value: number, width: number, noPad: boolean): string {
  return noPad ? String(value) : String(value).padStart(width, "0");
}

function dayOfYear(date: Date): number {
  const start = Date.UTC(date.getUTCFullYear(), 0, 1);
  return Math.floor((date.getTime() - start) / 86_400_000) + 1;
}

export function strftime(date: Date, format: string): string {
  return format.replace(/%(-?)([a-zA-Z%])/g, (whole, flag: string, code: string) => {
    const noPad = flag === "-";
    const hours = date.getUTCHours();
    switch (code) {
      case "a":
        return DAYS[date.getUTCDay()].slice(0, 3);
      case "A":
        return DAYS[date.getUTCDay()];
      case "b":
      case "h":
        return MONTHS[date.getUTCMonth()].slice(0, 3);
      case "B":
        return MONTHS[date.getUTCMonth()];
      case "d":
        return pad(date.getUTCDate(), 2, noPad);
      case "e":
        return String(date.getUTCDate()).padStart(2, " ");
      case "m":
        return pad(date.getUTCMonth() + 1, 2, noPad);
      case "y":
        return pad(date.getUTCFullYear() % 100, 2, noPad);
      case "Y":
        return String(date.getUTCFullYear());
      case "H":
        return pad(hours, 2, noPad);
      case "I":
        return pad(hours % 12 === 0 ? 12 : hours % 12, 2, noPad);
      case "p":
        return hours < 12 ? "AM" : "PM";
      case "M":
        return pad(date.getUTCMinutes(), 2, noPad);
      case "S":
        return pad(date.getUTCSeconds(), 2, noPad);
      case "f":
        return String(date.getUTCMilliseconds() * 1000).padStart(6, "0");
      case "j":
        return pad(dayOfYear(date), 3, noPad);
      case "w":
        return String(date.getUTCDay());
      case "Z":
        return "UTC";
      case "z":
        return "+0000";
      case "%":
        return "%";
      default:
        return whole; // Python leaves unknown directives as they are
    }
  });
}
