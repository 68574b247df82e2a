/** The rendered Kubernetes manifests and the helpers the deploy tests share. */
import { type K8sObject, renderKustomization } from "./kustomize.ts";

export const KUBERNETES_DIR = new URL("../../deploy/kubernetes/", import.meta.url);

/** Every kustomization a user can apply: the base and each region's overlay. */
export const KUSTOMIZATIONS = ["base", "overlays/region-a", "overlays/region-b"] as const;

export function render(name: string): Promise<K8sObject[]> {
  return renderKustomization(new URL(`${name}/`, KUBERNETES_DIR));
}

export function only(objects: K8sObject[], kind: string, name = "tidegate"): K8sObject {
  const found = objects.filter((o) => o.kind === kind && o.metadata?.name === name);
  if (found.length !== 1) throw new Error(`expected one ${kind} ${name}, found ${found.length}`);
  return found[0];
}

/** The ConfigMap volume and its mount: where the router's config files appear in the pod. */
export function configMount(objects: K8sObject[]) {
  const deployment = only(objects, "Deployment");
  const pod = deployment.spec.template.spec;
  const container = pod.containers.find((c: K8sObject) => c.name === "tidegate");
  const volume = pod.volumes.find((v: K8sObject) => v.configMap);
  const mount = container.volumeMounts.find((m: K8sObject) => m.name === volume.name);
  const configMap = only(objects, "ConfigMap", volume.configMap.name);
  return { deployment, pod, container, volume, mount, configMap };
}
