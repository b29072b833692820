# Copies a DRA .proto for protoc-c: without its `service` blocks (as
# proto/strip_services.cmake does, the methods are routed by hand in
# src/node/draplugin/) and without proto3 `optional`, which protoc-c 1.4
# refuses. A proto3 optional string is the same on the wire as a plain one
# that is left empty when unset, which is all the C side does with it.
# Usage: cmake -DIN=api.proto -DOUT=gen/api.proto -P protoc_c.cmake
file(READ "${IN}" text)
string(REGEX REPLACE "service [A-Za-z0-9_]+ {([^{}]|{})*}" "" text "${text}")
string(REGEX REPLACE "\toptional " "\t" text "${text}")
file(WRITE "${OUT}" "${text}")
