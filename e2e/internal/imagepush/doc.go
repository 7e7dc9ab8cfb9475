// Package imagepush puts the project's images where a cluster that is not kind pulls them:
// each local svclb/<name>:dev (`make images`) tagged under the registry and pushed with the
// docker CLI, one progress line per image (svclb-e2e images push). The registry and the
// references are fixtures/images'.
package imagepush
