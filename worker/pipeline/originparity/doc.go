// Package originparity holds only a test: the edge pipeline's local
// answers (404, 405, 401, 403, 400) are compared byte for byte with the
// origin's (origin/server) for the same requests. It is a package of its
// own so that worker/pipeline's tests do not depend on the origin's
// build.
package originparity
