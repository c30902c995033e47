package server

import "github.com/stratahq/strata/internal/httpapi"

// OpenAPI returns the OpenAPI 3.1 document of this release, exactly as GET /v1/openapi.json
// serves it, for `strata openapi`: the CLI reaches the server side only through this package.
func OpenAPI(version string) ([]byte, error) { return httpapi.OpenAPIJSON(version) }
