# Copies a .proto without its `service` blocks, for protoc-c.
# protoc-c names a service's C members after its methods, and the
# Registration service's method `Register` becomes the C keyword `register`,
# which does not compile. We only need the messages from protoc-c: the gRPC
# method paths are routed by hand in src/node/deviceplugin/.
# Usage: cmake -DIN=api.proto -DOUT=messages/api.proto -P strip_services.cmake
file(READ "${IN}" text)
string(REGEX REPLACE "service [A-Za-z0-9_]+ {([^{}]|{})*}" "" text "${text}")
file(WRITE "${OUT}" "${text}")
