module github.com/lectern-api/lectern

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.0 // indirect
	github.com/valyala/fastjson v1.6.4 // indirect
)
