// Package clients holds no Go code: it is the home of limitnode's clients
// in other languages, each a package of its own ecosystem that speaks the
// HTTP API of api/openapi.yaml.
//
//   - typescript/: @limitnode/client, for Node (npm; types generated from
//     the OpenAPI document with openapi-typescript).
//   - python/: limitnode, for Python (the standard library only).
//
// Its test runs both clients' own suites, each against a real three-node
// cluster of the limitnode binary built from this tree, so that the
// repository's test command covers them.
package clients
