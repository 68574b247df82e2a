/**
 * A small kustomize: just the parts deploy/kubernetes uses, rendered the way `kubectl kustomize`
 * does, so the tests can check what an overlay really applies. Anything else in a
 * kustomization.yaml is an error here (a new feature needs its rendering added, not ignored).
 *
 * Supported: `resources` (files and directories holding a kustomization.yaml), `namespace`,
 * `configMapGenerator` (`files`, `behavior: create|replace|merge`) with
 * `generatorOptions.disableNameSuffixHash: true`, `patches` (`path` to a strategic-merge patch,
 * lists of objects merged by `name`), `images` (`newName`, `newTag`).
 */
import { parse as parseYaml, parseAllDocuments } from "yaml";

// deno-lint-ignore no-explicit-any
export type K8sObject = Record<string, any>;

const KNOWN_FIELDS = new Set([
  "apiVersion",
  "kind",
  "namespace",
  "resources",
  "configMapGenerator",
  "generatorOptions",
  "patches",
  "images",
]);

/** The YAML documents of a file, empty ones dropped. */
export function parseYamlDocuments(text: string, name: string): K8sObject[] {
  const objects: K8sObject[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`${name}: ${doc.errors[0].message}`);
    const value = doc.toJS();
    if (value !== null && value !== undefined) objects.push(value);
  }
  return objects;
}

function isObject(value: unknown): value is K8sObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function sameObject(a: K8sObject, b: K8sObject): boolean {
  return a.kind === b.kind && a.metadata?.name === b.metadata?.name &&
    (a.metadata?.namespace ?? "") === (b.metadata?.namespace ?? "");
}

/** A strategic merge: maps merge recursively, lists of named objects merge by name. */
export function strategicMerge(base: unknown, patch: unknown): unknown {
  if (patch === null) return undefined;
  if (isObject(base) && isObject(patch)) {
    const out: K8sObject = { ...base };
    for (const [key, value] of Object.entries(patch)) {
      const merged = strategicMerge(base[key], value);
      if (merged === undefined) delete out[key];
      else out[key] = merged;
    }
    return out;
  }
  const named = (list: unknown[]) => list.every((item) => isObject(item) && "name" in item);
  if (Array.isArray(base) && Array.isArray(patch) && named(base) && named(patch)) {
    const out = [...base] as K8sObject[];
    for (const item of patch as K8sObject[]) {
      const at = out.findIndex((existing) => existing.name === item.name);
      if (at >= 0) out[at] = strategicMerge(out[at], item) as K8sObject;
      else out.push(item);
    }
    return out;
  }
  return structuredClone(patch);
}

function setImages(object: K8sObject, images: K8sObject[]): void {
  const spec = object.spec?.template?.spec;
  if (!spec) return;
  for (const container of [...(spec.containers ?? []), ...(spec.initContainers ?? [])]) {
    const [name, tag] = String(container.image).split(":");
    const rule = images.find((image) => image.name === name);
    if (!rule) continue;
    container.image = `${rule.newName ?? name}:${rule.newTag ?? tag ?? "latest"}`;
  }
}

/** Renders the kustomization in `dir` (a file: URL ending in "/"): the objects it applies. */
export async function renderKustomization(dir: URL): Promise<K8sObject[]> {
  const file = new URL("kustomization.yaml", dir);
  const k = parseYaml(await Deno.readTextFile(file)) as K8sObject;
  const unknown = Object.keys(k).filter((key) => !KNOWN_FIELDS.has(key));
  if (unknown.length > 0) throw new Error(`${file.pathname}: unsupported ${unknown.join(", ")}`);

  let objects: K8sObject[] = [];
  for (const resource of k.resources ?? []) {
    const url = new URL(resource, dir);
    const stat = await Deno.stat(url);
    if (stat.isDirectory) {
      objects.push(...await renderKustomization(new URL(`${resource.replace(/\/$/, "")}/`, dir)));
    } else {
      objects.push(...parseYamlDocuments(await Deno.readTextFile(url), url.pathname));
    }
  }

  for (const generator of k.configMapGenerator ?? []) {
    if (k.generatorOptions?.disableNameSuffixHash !== true) {
      throw new Error(`${file.pathname}: name suffix hashes are not rendered here`);
    }
    const data: Record<string, string> = {};
    for (const name of generator.files ?? []) {
      data[name.split("/").pop()] = await Deno.readTextFile(new URL(name, dir));
    }
    const made: K8sObject = {
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: generator.name, namespace: generator.namespace ?? k.namespace },
      data,
    };
    if (made.metadata.namespace === undefined) delete made.metadata.namespace;
    const at = objects.findIndex((object) => sameObject(object, made));
    const behavior = generator.behavior ?? "create";
    if (behavior === "create") {
      if (at >= 0) throw new Error(`${file.pathname}: ConfigMap ${generator.name} exists already`);
      objects.push(made);
    } else {
      if (at < 0) {
        throw new Error(`${file.pathname}: no ConfigMap ${generator.name} to ${behavior}`);
      }
      objects[at] = behavior === "replace"
        ? made
        : { ...objects[at], data: { ...objects[at].data, ...data } };
    }
  }

  for (const patch of k.patches ?? []) {
    if (!patch.path || patch.target || patch.patch) {
      throw new Error(`${file.pathname}: only patches with a path are rendered here`);
    }
    const url = new URL(patch.path, dir);
    for (const p of parseYamlDocuments(await Deno.readTextFile(url), url.pathname)) {
      const matches = objects.filter((object) =>
        object.kind === p.kind && object.apiVersion === p.apiVersion &&
        object.metadata?.name === p.metadata?.name
      );
      if (matches.length !== 1) {
        throw new Error(`${url.pathname}: patch matches ${matches.length} objects, not 1`);
      }
      objects = objects.map((object) =>
        object === matches[0] ? strategicMerge(object, p) as K8sObject : object
      );
    }
  }

  objects = objects.map((object) => structuredClone(object));
  if (k.images) { for (const object of objects) setImages(object, k.images); }
  if (k.namespace) {
    for (const object of objects) object.metadata = { ...object.metadata, namespace: k.namespace };
  }
  return objects;
}
