/**
 * Finding what a config schema allows at a field path, and what the file holds there, so an
 * error can suggest the closest valid name ("did you mean …?").
 */
import type { z } from "zod";

type Def = {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  in?: z.ZodType;
  valueType?: z.ZodType;
};

const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** The object schemas a value at this schema may be (wrappers and union members unwrapped). */
function objectsOf(schema: z.ZodType): Def[] {
  const def = defOf(schema);
  if (def.type === "object") return [def];
  if (def.innerType) return objectsOf(def.innerType);
  if (def.in) return objectsOf(def.in);
  if (def.type === "union") return (def.options ?? []).flatMap(objectsOf);
  return [];
}

/** The schema of one step down: an object's field, an array's element, a record's value. */
function childOf(schema: z.ZodType, key: PropertyKey): z.ZodType[] {
  const def = defOf(schema);
  if (def.innerType) return childOf(def.innerType, key);
  if (def.in) return childOf(def.in, key);
  if (def.type === "union") return (def.options ?? []).flatMap((o) => childOf(o, key));
  if (def.type === "array" && typeof key === "number" && def.element) return [def.element];
  if (def.type === "record" && def.valueType) return [def.valueType];
  const field = def.type === "object" ? def.shape?.[String(key)] : undefined;
  return field ? [field] : [];
}

/** The field names an object at `path` may have (empty when the path leads to no object). */
export function knownKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let here = [schema];
  for (const key of path) here = here.flatMap((s) => childOf(s, key));
  return [...new Set(here.flatMap(objectsOf).flatMap((def) => Object.keys(def.shape ?? {})))];
}

/** The raw value at `path` of a parsed file (undefined when absent). */
export function valueAt(raw: unknown, path: readonly PropertyKey[]): unknown {
  let here = raw;
  for (const key of path) {
    if (here === null || typeof here !== "object") return undefined;
    here = (here as Record<PropertyKey, unknown>)[key as string];
  }
  return here;
}
