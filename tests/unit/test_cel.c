/*
 * test_cel.c - the CEL selector language: a table of expressions with their results or errors.
 *
 * Each row is evaluated on one of two fixed devices (a whole H100 and a MIG slice laid out
 * as NVIDIA's DRA driver publishes them) and checked against the expected value, or the
 * expected error: compile or run time, a fragment of the message and the column. Separate
 * tests cover the limits (length, depth, cost), NVIDIA's own class selectors, sharing one
 * program across threads and the commutative error rules of && and ||.
 */
#include "core/cel.h"
#include "core/error.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define GI ((int64_t)1024 * 1024 * 1024)
#define NV "gpu.nvidia.com"
#define K8S "resource.kubernetes.io"

static const struct gs_cel_attr gpu_attrs[] = {
    { .domain = NV, .name = "type", .kind = GS_CEL_STRING, .s = "gpu" },
    { .domain = NV, .name = "uuid", .kind = GS_CEL_STRING, .s = "GPU-4d2f1a8c-0000-1111-2222-333344445555" },
    { .domain = NV, .name = "productName", .kind = GS_CEL_STRING, .s = "NVIDIA H100 80GB HBM3" },
    { .domain = NV, .name = "brand", .kind = GS_CEL_STRING, .s = "Nvidia" },
    { .domain = NV, .name = "architecture", .kind = GS_CEL_STRING, .s = "Hopper" },
    { .domain = NV, .name = "cudaComputeCapability", .kind = GS_CEL_VERSION, .s = "9.0.0" },
    { .domain = NV, .name = "driverVersion", .kind = GS_CEL_VERSION, .s = "550.54.15" },
    { .domain = NV, .name = "cudaDriverVersion", .kind = GS_CEL_VERSION, .s = "12.4.0" },
    { .domain = NV, .name = "nvlinkDomain", .kind = GS_CEL_INT, .i = 1 },
    { .domain = NV, .name = "healthy", .kind = GS_CEL_BOOL, .b = true },
    { .domain = K8S, .name = "pciBusID", .kind = GS_CEL_STRING, .s = "0000:1b:00.0" },
    { .domain = K8S, .name = "numaNode", .kind = GS_CEL_INT, .i = 0 },
    { .domain = K8S, .name = "pcieRoot", .kind = GS_CEL_STRING, .s = "pci0000:17" },
};
static const struct gs_cel_attr gpu_caps[] = {
    { .domain = NV, .name = "memory", .kind = GS_CEL_QUANTITY, .q_milli = 80 * GI * 1000 },
};
static const struct gs_cel_attr mig_attrs[] = {
    { .domain = NV, .name = "type", .kind = GS_CEL_STRING, .s = "mig" },
    { .domain = NV, .name = "uuid", .kind = GS_CEL_STRING, .s = "MIG-77aa" },
    { .domain = NV, .name = "parentUUID", .kind = GS_CEL_STRING, .s = "GPU-4d2f1a8c-0000-1111-2222-333344445555" },
    { .domain = NV, .name = "profile", .kind = GS_CEL_STRING, .s = "1g.10gb" },
    { .domain = NV, .name = "productName", .kind = GS_CEL_STRING, .s = "NVIDIA H100 80GB HBM3" },
    { .domain = NV, .name = "driverVersion", .kind = GS_CEL_VERSION, .s = "550.54.15-rc.1" },
};
static const struct gs_cel_attr mig_caps[] = {
    { .domain = NV, .name = "memory", .kind = GS_CEL_QUANTITY, .q_milli = 10 * GI * 1000 },
    { .domain = NV, .name = "multiprocessors", .kind = GS_CEL_QUANTITY, .q_milli = 16000 },
};

static const struct gs_cel_device devs[] = {
    { .driver = NV, .attrs = gpu_attrs, .nattrs = sizeof gpu_attrs / sizeof gpu_attrs[0],
      .capacity = gpu_caps, .ncapacity = 1 },
    { .driver = NV, .attrs = mig_attrs, .nattrs = sizeof mig_attrs / sizeof mig_attrs[0],
      .capacity = mig_caps, .ncapacity = 2, .allow_multiple_allocations = true },
};

enum want { T, F, ECOMPILE, ERUN };

struct row {
    const char *expr;
    int dev;              /* 0 the GPU, 1 the MIG device */
    enum want want;
    const char *msg;      /* fragment of the error message */
    size_t col;           /* 0: not checked */
};

#define A(d, n) "device.attributes[\"" d "\"]." n
#define G(n) A(NV, n)

static const struct row rows[] = {
    /* literals and basic logic */
    { "true", 0, T, NULL, 0 },
    { "false", 0, F, NULL, 0 },
    { "!false", 0, T, NULL, 0 },
    { "!!true", 0, T, NULL, 0 },
    { "(true)", 0, T, NULL, 0 },
    { "true && false", 0, F, NULL, 0 },
    { "true || false", 0, T, NULL, 0 },
    { "false || false", 0, F, NULL, 0 },
    { "true && true && true", 0, T, NULL, 0 },
    { "false && true || true", 0, T, NULL, 0 },
    { "false && (true || true)", 0, F, NULL, 0 },
    { "1 == 1", 0, T, NULL, 0 },
    { "1 != 1", 0, F, NULL, 0 },
    { "-1 < 0", 0, T, NULL, 0 },
    { "2 <= 2 && 3 >= 2 && 3 > 2", 0, T, NULL, 0 },
    { "0x10 == 16", 0, T, NULL, 0 },
    { "1u == 1u", 0, T, NULL, 0 },
    { "1 == 1u", 0, T, NULL, 0 },
    { "2u > 1", 0, T, NULL, 0 },
    { "-1 < 0u", 0, T, NULL, 0 },
    { "-9223372036854775808 < 0", 0, T, NULL, 0 },
    { "9223372036854775807 > 0", 0, T, NULL, 0 },
    { "1 + 2 * 3 == 7", 0, T, NULL, 0 },
    { "(1 + 2) * 3 == 9", 0, T, NULL, 0 },
    { "7 / 2 == 3 && 7 % 2 == 1", 0, T, NULL, 0 },
    { "10u - 3u == 7u", 0, T, NULL, 0 },
    { "'a' == \"a\"", 0, T, NULL, 0 },
    { "\"a\\tb\" == 'a\\u0009b'", 0, T, NULL, 0 },
    { "\"\\x41\\101\" == 'AA'", 0, T, NULL, 0 },
    { "r\"\\d\" == '\\\\d'", 0, T, NULL, 0 },
    { "'\\u00e9'.size() == 1", 0, T, NULL, 0 },
    { "\"ab\" + \"cd\" == \"abcd\"", 0, T, NULL, 0 },
    { "\"abc\" < \"abd\"", 0, T, NULL, 0 },
    { "\"b\" > \"abc\"", 0, T, NULL, 0 },
    { "false < true", 0, T, NULL, 0 },
    { "null == null", 0, T, NULL, 0 },
    { "true ? true : false", 0, T, NULL, 0 },
    { "false ? true : 1 == 2", 0, F, NULL, 0 },
    { "(1 > 2 ? 'x' : 'y') == 'y'", 0, T, NULL, 0 },
    { "// a comment\ntrue", 0, T, NULL, 0 },
    { "true &&\n  true", 0, T, NULL, 0 },
    /* device fields */
    { "device.driver == \"gpu.nvidia.com\"", 0, T, NULL, 0 },
    { "device.driver != 'gpu.nvidia.com'", 0, F, NULL, 0 },
    { "device.allowMultipleAllocations", 1, T, NULL, 0 },
    { "device.allowMultipleAllocations", 0, F, NULL, 0 },
    { "device.driver.startsWith('gpu.')", 0, T, NULL, 0 },
    /* attributes */
    { G("type") " == 'gpu'", 0, T, NULL, 0 },
    { G("type") " == 'gpu'", 1, F, NULL, 0 },
    { "device.attributes['gpu.nvidia.com']['type'] == 'gpu'", 0, T, NULL, 0 },
    { G("productName") " == 'NVIDIA H100 80GB HBM3'", 0, T, NULL, 0 },
    { G("nvlinkDomain") " == 1", 0, T, NULL, 0 },
    { G("nvlinkDomain") " > 0", 0, T, NULL, 0 },
    { G("nvlinkDomain") " == 1u", 0, T, NULL, 0 },
    { G("healthy"), 0, T, NULL, 0 },
    { "!" G("healthy"), 0, F, NULL, 0 },
    { A(K8S, "numaNode") " == 0", 0, T, NULL, 0 },
    { A(K8S, "pciBusID") ".startsWith('0000:1b')", 0, T, NULL, 0 },
    { A(K8S, "pcieRoot") " == 'pci0000:17'", 0, T, NULL, 0 },
    { G("nvlinkDomain") " == 'x'", 0, F, NULL, 0 },            /* different types: not equal */
    { G("productName") " != 1", 0, T, NULL, 0 },
    { G("profile") " == '1g.10gb'", 1, T, NULL, 0 },
    { G("parentUUID") " == 'GPU-4d2f1a8c-0000-1111-2222-333344445555'", 1, T, NULL, 0 },
    /* string functions */
    { G("productName") ".startsWith('NVIDIA')", 0, T, NULL, 0 },
    { G("productName") ".endsWith('HBM3')", 0, T, NULL, 0 },
    { G("productName") ".contains('H100')", 0, T, NULL, 0 },
    { G("productName") ".contains('A100')", 0, F, NULL, 0 },
    { G("productName") ".contains('')", 0, T, NULL, 0 },
    { G("productName") ".startsWith('NVIDIA H100 80GB HBM3 and more')", 0, F, NULL, 0 },
    { "size(" G("architecture") ") == 6", 0, T, NULL, 0 },
    { G("architecture") ".size() == 6", 0, T, NULL, 0 },
    { G("architecture") ".lowerAscii() == 'hopper'", 0, T, NULL, 0 },
    { G("architecture") ".upperAscii() == 'HOPPER'", 0, T, NULL, 0 },
    { "size([1, 2, 3]) == 3", 0, T, NULL, 0 },
    { "size(device.attributes['gpu.nvidia.com']) == 10", 0, T, NULL, 0 },
    /* matches (RE2 subset) */
    { G("productName") ".matches('H100')", 0, T, NULL, 0 },
    { G("productName") ".matches('^NVIDIA (A|H)100')", 0, T, NULL, 0 },
    { G("productName") ".matches('^A100')", 0, F, NULL, 0 },
    { G("productName") ".matches('\\\\d+GB')", 0, T, NULL, 0 },
    { G("productName") ".matches(r'H\\d{3} \\d+GB')", 0, T, NULL, 0 },
    { G("productName") ".matches('(?i)nvidia h100')", 0, T, NULL, 0 },
    { G("productName") ".matches('[[:upper:]]+ H')", 0, T, NULL, 0 },
    { G("productName") ".matches('[\\\\d]{2}GB')", 0, T, NULL, 0 },
    { G("profile") ".matches('^[1-7]g\\\\.[0-9]+gb$')", 1, T, NULL, 0 },
    { "matches('abc', 'b')", 0, T, NULL, 0 },
    { "'abc'.matches('(?:a|x)bc$')", 0, T, NULL, 0 },
    { "'abc'.matches('a' + 'b')", 0, T, NULL, 0 },
    { "'abc'.matches(\"\\\\w+\\\\s\")", 0, F, NULL, 0 },
    /* in */
    { "'a' in ['a', 'b']", 0, T, NULL, 0 },
    { "'c' in ['a', 'b']", 0, F, NULL, 0 },
    { "1 in [1u, 2]", 0, T, NULL, 0 },
    { G("architecture") " in ['Ampere', 'Hopper', 'Blackwell']", 0, T, NULL, 0 },
    { G("architecture") " in ['Ampere']", 0, F, NULL, 0 },
    { "'productName' in device.attributes['gpu.nvidia.com']", 0, T, NULL, 0 },
    { "'profile' in device.attributes['gpu.nvidia.com']", 0, F, NULL, 0 },
    { "'gpu.nvidia.com' in device.attributes", 0, T, NULL, 0 },
    { "'example.com' in device.attributes", 0, F, NULL, 0 },
    { "'memory' in device.capacity['gpu.nvidia.com']", 0, T, NULL, 0 },
    { "[] == []", 0, T, NULL, 0 },
    { "[1, 'a'] == [1, 'a']", 0, T, NULL, 0 },
    { "[1, 2] + [3] == [1, 2, 3]", 0, T, NULL, 0 },
    { "[1, 2, 3][1] == 2", 0, T, NULL, 0 },
    { "['a',].size() == 1", 0, T, NULL, 0 },
    /* has() */
    { "has(" G("productName") ")", 0, T, NULL, 0 },
    { "has(" G("profile") ")", 0, F, NULL, 0 },
    { "has(" G("profile") ")", 1, T, NULL, 0 },
    { "has(device.attributes['example.com'].x)", 0, F, NULL, 0 },
    { "has(device.capacity['gpu.nvidia.com'].memory)", 0, T, NULL, 0 },
    { "has(device.driver)", 0, T, NULL, 0 },
    { "has(device.attributes.foo)", 0, F, NULL, 0 },
    { "!has(" G("profile") ") || " G("profile") " == '1g.10gb'", 0, T, NULL, 0 },
    { "has(" G("profile") ") && " G("profile") " == '1g.10gb'", 0, F, NULL, 0 },
    /* versions */
    { G("cudaComputeCapability") ".isGreaterThan(semver('8.0.0'))", 0, T, NULL, 0 },
    { G("cudaComputeCapability") ".isLessThan(semver('8.0.0'))", 0, F, NULL, 0 },
    { G("cudaComputeCapability") ".compareTo(semver('9.0.0')) == 0", 0, T, NULL, 0 },
    { G("driverVersion") ".compareTo(semver('550.54.14')) > 0", 0, T, NULL, 0 },
    { G("driverVersion") ".compareTo(semver('550.100.0')) < 0", 0, T, NULL, 0 },
    { G("driverVersion") ".isLessThan(semver('550.54.15'))", 1, T, NULL, 0 },     /* pre-release sorts below */
    { G("driverVersion") " == semver('550.54.15')", 0, T, NULL, 0 },
    { G("driverVersion") ".major() == 550 && " G("driverVersion") ".minor() == 54 && " G("driverVersion") ".patch() == 15", 0, T, NULL, 0 },
    { "semver('1.0.0-alpha') .isLessThan(semver('1.0.0-alpha.1'))", 0, T, NULL, 0 },
    { "semver('1.0.0-alpha.beta').isLessThan(semver('1.0.0-beta'))", 0, T, NULL, 0 },
    { "semver('1.0.0-2').isLessThan(semver('1.0.0-11'))", 0, T, NULL, 0 },
    { "semver('1.0.0-rc.1').isLessThan(semver('1.0.0'))", 0, T, NULL, 0 },
    { "semver('1.0.0+build.5').compareTo(semver('1.0.0')) == 0", 0, T, NULL, 0 },
    { "isSemver('1.2.3')", 0, T, NULL, 0 },
    { "isSemver('1.2')", 0, F, NULL, 0 },
    { "isSemver('01.2.3')", 0, F, NULL, 0 },
    { "string(semver('1.2.3')) == '1.2.3'", 0, T, NULL, 0 },
    /* quantities */
    { "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", 0, T, NULL, 0 },
    { "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", 1, F, NULL, 0 },
    { "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('79Gi'))", 0, T, NULL, 0 },
    { "device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('79Gi'))", 0, F, NULL, 0 },
    { "device.capacity['gpu.nvidia.com'].memory == quantity('80Gi')", 0, T, NULL, 0 },
    { "device.capacity['gpu.nvidia.com'].memory.asInteger() == 85899345920", 0, T, NULL, 0 },
    { "device.capacity['gpu.nvidia.com'].multiprocessors.asInteger() >= 14", 1, T, NULL, 0 },
    { "quantity('1.5').isInteger()", 0, F, NULL, 0 },
    { "quantity('2k').asInteger() == 2000", 0, T, NULL, 0 },
    { "quantity('500m').compareTo(quantity('0.5')) == 0", 0, T, NULL, 0 },
    { "quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi')", 0, T, NULL, 0 },
    { "quantity('1Gi').sub(1).asInteger() == 1073741823", 0, T, NULL, 0 },
    { "quantity('-1').sign() == -1", 0, T, NULL, 0 },
    { "isQuantity('40Gi') && !isQuantity('40GB')", 0, T, NULL, 0 },
    { "string(quantity('2048Mi')) == '2Gi'", 0, T, NULL, 0 },
    /* optionals */
    { "device.attributes['gpu.nvidia.com'].?profile.orValue('none') == 'none'", 0, T, NULL, 0 },
    { "device.attributes['gpu.nvidia.com'].?profile.orValue('none') == '1g.10gb'", 1, T, NULL, 0 },
    { "device.attributes['gpu.nvidia.com'].?profile.hasValue()", 0, F, NULL, 0 },
    { "device.attributes['gpu.nvidia.com'].?type.value() == 'gpu'", 0, T, NULL, 0 },
    { "device.attributes['gpu.nvidia.com'][?'profile'].orValue('') == ''", 0, T, NULL, 0 },
    { "device.attributes['x.io'].?a.orValue(3) == 3", 0, T, NULL, 0 },
    { "optional.of(1).orValue(2) == 1", 0, T, NULL, 0 },
    { "optional.none().orValue(2) == 2", 0, T, NULL, 0 },
    /* conversions and cel.bind */
    { "int('42') == 42", 0, T, NULL, 0 },
    { "uint(42) == 42u", 0, T, NULL, 0 },
    { "string(42) == '42'", 0, T, NULL, 0 },
    { "int(" G("nvlinkDomain") ") + 1 == 2", 0, T, NULL, 0 },
    { "cel.bind(a, device.attributes['gpu.nvidia.com'], a.type == 'gpu' && a.architecture == 'Hopper')", 0, T, NULL, 0 },
    { "cel.bind(x, 1, cel.bind(y, x + 1, y == 2))", 0, T, NULL, 0 },
    { "cel.bind(x, 1, cel.bind(x, 'shadow', x == 'shadow'))", 0, T, NULL, 0 },
    /* commutative errors */
    { "false && " G("profile") " == 'x'", 0, F, NULL, 0 },
    { G("profile") " == 'x' && false", 0, F, NULL, 0 },
    { "true || " G("profile") " == 'x'", 0, T, NULL, 0 },
    { G("profile") " == 'x' || true", 0, T, NULL, 0 },
    { G("profile") " == 'x' || false", 0, ERUN, "no such key: profile", 37 },
    { "true && " G("profile") " == 'x'", 0, ERUN, "no such key: profile", 45 },
    /* unknown domain is an empty map; unknown attribute is an error */
    { "device.attributes['example.com'].size() == 0", 0, T, NULL, 0 },
    { "device.attributes['example.com'].x == 1", 0, ERUN, "no such key: x", 34 },
    { G("profile") " == '1g.10gb'", 0, ERUN, "no such key: profile", 37 },
    { "device.capacity['gpu.nvidia.com'].cores.asInteger() > 1", 0, ERUN, "no such key: cores", 35 },
    /* compile errors */
    { "devcie.driver == 'x'", 0, ECOMPILE, "undeclared reference to 'devcie'", 1 },
    { "device.drivr == 'x'", 0, ECOMPILE, "undefined field 'drivr'", 8 },
    { "device.driver == 1", 0, ECOMPILE, "found no matching overload for '_==_' applied to '(string, int)'", 15 },
    { "device.driver < 1", 0, ECOMPILE, "'_<_' applied to '(string, int)'", 15 },
    { "1 + 'a' == 'b'", 0, ECOMPILE, "'_+_' applied to '(int, string)'", 3 },
    { "!1", 0, ECOMPILE, "'!_' applied to '(int)'", 1 },
    { "1 && true", 0, ECOMPILE, "'_&&_' applied to '(int, bool)'", 3 },
    { "device.driver", 0, ECOMPILE, "must evaluate to bool, not 'string'", 1 },
    { "1 + 1", 0, ECOMPILE, "must evaluate to bool", 1 },
    { "device.driver.startsWith(1)", 0, ECOMPILE, "found no matching overload for 'startsWith' applied to 'string.(int)'", 15 },
    { "device.driver.frobnicate()", 0, ECOMPILE, "undeclared reference to 'frobnicate'", 15 },
    { "frob(1)", 0, ECOMPILE, "undeclared reference to 'frob'", 1 },
    { "semver(1).major() == 1", 0, ECOMPILE, "'semver' applied to '(int)'", 1 },
    { "quantity('1').major() == 1", 0, ECOMPILE, "'major' applied to 'kubernetes.Quantity.()'", 15 },
    { "semver('1.0.0').compareTo(quantity('1')) == 0", 0, ECOMPILE, "'compareTo' applied to 'kubernetes.Semver.(kubernetes.Quantity)'", 17 },
    { "has(device)", 0, ECOMPILE, "invalid argument to has() macro", 5 },
    { "has(1)", 0, ECOMPILE, "invalid argument to has() macro", 5 },
    { "cel.bind(1, 2, true)", 0, ECOMPILE, "variable name must be a simple identifier", 10 },
    { "cel.other(1)", 0, ECOMPILE, "undeclared reference to 'cel.other'", 5 },
    { "x == 1", 0, ECOMPILE, "undeclared reference to 'x'", 1 },
    { "device.driver.x == 'a'", 0, ECOMPILE, "type 'string' does not support field selection", 15 },
    { "device.attributes[1].x == 1", 0, ECOMPILE, "'_[_]' applied to", 18 },
    { "-'a' == 'a'", 0, ECOMPILE, "'-_' applied to '(string)'", 1 },
    { "device.attributes == 1", 0, ECOMPILE, "'_==_' applied to '(map(string, map(string, dyn)), int)'", 19 },
    /* syntax errors */
    { "", 0, ECOMPILE, "empty", 1 },
    { "   ", 0, ECOMPILE, "empty", 1 },
    { "true &&", 0, ECOMPILE, "expecting an operand", 8 },
    { "(true", 0, ECOMPILE, "expecting ')'", 6 },
    { "true)", 0, ECOMPILE, "extraneous input ')'", 5 },
    { "device.driver = 'x'", 0, ECOMPILE, "use ==", 15 },
    { "'abc", 0, ECOMPILE, "unterminated string", 1 },
    { "'a\\qb' == 'x'", 0, ECOMPILE, "invalid escape sequence", 3 },
    { "1.5 > 1", 0, ECOMPILE, "floating-point literals are not supported", 1 },
    { "1e3 > 1", 0, ECOMPILE, "floating-point", 1 },
    { "b'ab' == b'ab'", 0, ECOMPILE, "bytes literals are not supported", 1 },
    { "{'a': 1}['a'] == 1", 0, ECOMPILE, "map literals are not supported", 1 },
    { "99999999999999999999 > 1", 0, ECOMPILE, "int literal out of range", 1 },
    { "9223372036854775808 > 1", 0, ECOMPILE, "int literal out of range", 1 },
    { "true & false", 0, ECOMPILE, "token recognition error at: '&'", 6 },
    { "device.driver == 'x' #", 0, ECOMPILE, "token recognition error at: '#'", 22 },
    { "if == 1", 0, ECOMPILE, "reserved identifier 'if'", 1 },
    { "device.", 0, ECOMPILE, "expecting a field name", 8 },
    { "'''a''' == 'a'", 0, ECOMPILE, "triple-quoted", 1 },
    { "12abc == 1", 0, ECOMPILE, "after number", 3 },
    { "true ? 1", 0, ECOMPILE, "expecting ':'", 9 },
    /* regex features POSIX cannot express */
    { "'a'.matches('\\\\bword')", 0, ECOMPILE, "word boundaries", 13 },
    { "'a'.matches('a*?')", 0, ECOMPILE, "non-greedy", 13 },
    { "'a'.matches('(?P<n>a)')", 0, ECOMPILE, "group flags", 13 },
    { "'a'.matches('\\\\pL')", 0, ECOMPILE, "Unicode classes", 13 },
    { "'a'.matches('[a')", 0, ECOMPILE, "missing closing ]", 13 },
    { "'a'.matches('a++')", 0, ECOMPILE, "bad repetition operator", 13 },
    { "'a'.matches('(a{900}){900}')", 0, ECOMPILE, "counts above 1000", 13 },
    { "'aaa'.matches('^a{2,3}$')", 0, T, NULL, 0 },
    { "'a'.matches('a{2,1}')", 0, ECOMPILE, "invalid regular expression", 13 },
    { "'a'.matches('x' + '(?=y)')", 0, ERUN, "group flags", 5 },
    /* runtime errors */
    { "semver('1.2') == semver('1.2.0')", 0, ERUN, "semver(\"1.2\"): not a semantic version", 1 },
    { "quantity('40GB').isInteger()", 0, ERUN, "quantity(\"40GB\")", 1 },
    { "quantity('1.5').asInteger() == 1", 0, ERUN, "not a whole number", 17 },
    { "device.capacity['gpu.nvidia.com'].memory > quantity('40Gi')", 0, ECOMPILE, "'_>_' applied to '(kubernetes.Quantity, kubernetes.Quantity)': use compareTo()", 42 },
    { G("driverVersion") " >= semver('1.0.0')", 0, ECOMPILE, "'_>=_' applied to '(dyn, kubernetes.Semver)'", 51 },
    { "semver('1.0.0') < semver('1.0.1')", 0, ECOMPILE, "'_<_' applied to '(kubernetes.Semver, kubernetes.Semver)': use compareTo()", 17 },
    { "cel.bind(v, " G("driverVersion") ", v >= v)", 0, ERUN, "'_>=_' applied to '(kubernetes.Semver, kubernetes.Semver)': use compareTo()", 66 },
    { G("productName") " > 5", 0, ERUN, "'_>_' applied to '(string, int)'", 49 },
    { G("productName") ".major() == 1", 0, ERUN, "'major' applied to 'string.()'", 49 },
    { G("nvlinkDomain") ".startsWith('a')", 0, ERUN, "'startsWith' applied to 'int.(string)'", 50 },
    { G("nvlinkDomain") " && true", 0, ERUN, "'_&&_' applied to '(int, ...)'", 37 },
    { G("productName"), 0, ERUN, "must evaluate to bool, not 'string'", 0 },
    { "1 / 0 == 1", 0, ERUN, "division by zero", 3 },
    { "1 % 0 == 1", 0, ERUN, "modulus by zero", 3 },
    { "9223372036854775807 + 1 > 0", 0, ERUN, "integer overflow", 21 },
    { "-9223372036854775808 - 1 < 0", 0, ERUN, "integer overflow", 22 },
    { "0u - 1u == 0u", 0, ERUN, "unsigned integer overflow", 4 },
    { "[1][5] == 1", 0, ERUN, "index out of range: 5", 4 },
    { "int('x') == 1", 0, ERUN, "int(\"x\"): not an int", 1 },
    { "uint(-1) == 1u", 0, ERUN, "range error", 1 },
    { "optional.none().value() == 1", 0, ERUN, "optional.none() dereference", 17 },
    { "device.attributes['gpu.nvidia.com'].type.x == 1", 0, ERUN, "does not support field selection", 42 },
    /* NVIDIA's DeviceClass selectors, verbatim */
    { "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'", 0, T, NULL, 0 },
    { "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'", 1, F, NULL, 0 },
    { "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'", 1, T, NULL, 0 },
    { "device.attributes['gpu.nvidia.com'].productName.matches('H100') && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", 0, T, NULL, 0 },
    { "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", 1, T, NULL, 0 },
    { "device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0", 0, T, NULL, 0 },
};

static void test_table(void **state)
{
    (void)state;
    size_t n = sizeof rows / sizeof rows[0];
    int failures = 0;
    for (size_t i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        struct gs_cel_program *p = NULL;
        struct gs_cel_error err;
        int rc = gs_cel_compile(r->expr, &p, &err);
        const char *problem = NULL;
        char got[400] = "";
        if (r->want == ECOMPILE) {
            if (rc == 0) problem = "compiled, expected a compile error";
            else if (rc != GS_EPARSE && rc != GS_EINVAL) problem = "wrong error code";
            else if (!strstr(err.msg, r->msg) || (r->col && err.column != r->col)) problem = "wrong compile error";
            snprintf(got, sizeof got, "rc %d col %zu msg %s", rc, err.column, err.msg);
        } else if (rc != 0) {
            problem = "did not compile";
            snprintf(got, sizeof got, "col %zu msg %s", err.column, err.msg);
        } else {
            bool res = false;
            memset(&err, 0, sizeof err);
            int erc = gs_cel_eval(p, &devs[r->dev], &res, &err);
            if (r->want == ERUN) {
                if (erc == 0) problem = "evaluated, expected a runtime error";
                else if (erc != GS_EINVAL || !strstr(err.msg, r->msg) || (r->col && err.column != r->col))
                    problem = "wrong runtime error";
                snprintf(got, sizeof got, "rc %d result %d col %zu msg %s", erc, res, err.column, err.msg);
            } else if (erc != 0) {
                problem = "runtime error";
                snprintf(got, sizeof got, "col %zu msg %s", err.column, err.msg);
            } else if (res != (r->want == T)) {
                problem = "wrong result";
                snprintf(got, sizeof got, "%s", res ? "true" : "false");
            }
        }
        if (problem) {
            fprintf(stderr, "row %zu: %s\n  expr: %s\n  got: %s\n  want: %s col %zu\n", i, problem, r->expr, got,
                    r->msg ? r->msg : (r->want == T ? "true" : "false"), r->col);
            failures++;
        }
        gs_cel_free(p);
    }
    assert_true(n >= 150);
    assert_int_equal(failures, 0);
}

static void test_error_messages_carry_column(void **state)
{
    (void)state;
    /* every compile error names a column inside the expression (or one past its end) */
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        if (rows[i].want != ECOMPILE) continue;
        struct gs_cel_program *p = NULL;
        struct gs_cel_error err;
        assert_int_not_equal(gs_cel_compile(rows[i].expr, &p, &err), 0);
        assert_null(p);
        assert_true(err.column >= 1);
        assert_true(err.column <= strlen(rows[i].expr) + 1);
        assert_true(strlen(err.msg) > 0);
    }
}

static void test_length_limit(void **state)
{
    (void)state;
    size_t n = GS_CEL_MAX_LENGTH;
    char *s = malloc(n + 2);
    assert_non_null(s);
    /* exactly at the limit compiles: "true" padded with spaces */
    memset(s, ' ', n);
    memcpy(s, "true", 4);
    s[n] = 0;
    struct gs_cel_program *p = NULL;
    struct gs_cel_error err;
    assert_int_equal(gs_cel_compile(s, &p, &err), 0);
    gs_cel_free(p);
    s[n] = ' ';
    s[n + 1] = 0;
    assert_int_equal(gs_cel_compile(s, &p, &err), GS_EINVAL);
    assert_non_null(strstr(err.msg, "too long: 10241 bytes, the limit is 10240"));
    assert_int_equal(err.column, GS_CEL_MAX_LENGTH + 1);
    free(s);
}

static void test_depth_limit(void **state)
{
    (void)state;
    char buf[512];
    struct gs_cel_program *p = NULL;
    struct gs_cel_error err;
    /* 98 parentheses plus the top level nest within 100 */
    size_t o = 0;
    for (int i = 0; i < 98; i++) buf[o++] = '(';
    memcpy(buf + o, "true", 4); o += 4;
    for (int i = 0; i < 98; i++) buf[o++] = ')';
    buf[o] = 0;
    assert_int_equal(gs_cel_compile(buf, &p, &err), 0);
    gs_cel_free(p);
    o = 0;
    for (int i = 0; i < 150; i++) buf[o++] = '(';
    memcpy(buf + o, "true", 4); o += 4;
    for (int i = 0; i < 150; i++) buf[o++] = ')';
    buf[o] = 0;
    assert_int_equal(gs_cel_compile(buf, &p, &err), GS_EPARSE);
    assert_non_null(strstr(err.msg, "nesting depth exceeds 100"));
    assert_int_equal(err.column, 101);
    /* a deep run of ! is nesting too */
    o = 0;
    for (int i = 0; i < 120; i++) buf[o++] = '!';
    memcpy(buf + o, "true", 5);
    assert_int_equal(gs_cel_compile(buf, &p, &err), GS_EPARSE);
    assert_non_null(strstr(err.msg, "nesting depth"));
}

static void test_cost_limit(void **state)
{
    (void)state;
    /* each bind doubles the string; matching it costs its length: past 1,000,000 it stops */
    char expr[2048];
    size_t o = 0;
    o += (size_t)snprintf(expr + o, sizeof expr - o, "cel.bind(s0, 'xxxxxxxxxxxxxxxx', ");
    int levels = 20;
    for (int i = 1; i <= levels; i++)
        o += (size_t)snprintf(expr + o, sizeof expr - o, "cel.bind(s%d, s%d + s%d, ", i, i - 1, i - 1);
    o += (size_t)snprintf(expr + o, sizeof expr - o, "s%d.matches('y') || s%d.matches('z') || s%d.matches('w')", levels, levels, levels);
    for (int i = 0; i <= levels; i++) expr[o++] = ')';
    expr[o] = 0;
    struct gs_cel_program *p = NULL;
    struct gs_cel_error err;
    assert_int_equal(gs_cel_compile(expr, &p, &err), 0);
    bool res;
    int64_t cost = 0;
    assert_int_equal(gs_cel_eval_cost(p, &devs[0], &res, &cost, &err), GS_EINVAL);
    assert_non_null(strstr(err.msg, "actual cost limit exceeded"));
    assert_true(cost > GS_CEL_MAX_COST);
    gs_cel_free(p);

    /* an ordinary selector costs little, and the cost is counted the same every time */
    assert_int_equal(gs_cel_compile("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'", &p, &err), 0);
    int64_t c1 = 0, c2 = 0;
    assert_int_equal(gs_cel_eval_cost(p, &devs[0], &res, &c1, &err), 0);
    assert_true(res);
    assert_int_equal(gs_cel_eval_cost(p, &devs[0], &res, &c2, &err), 0);
    assert_int_equal(c1, c2);
    assert_true(c1 > 5 && c1 < 50);
    gs_cel_free(p);
}

struct thr { const struct gs_cel_program *p; int ok; };

static void *thr_main(void *arg)
{
    struct thr *t = arg;
    for (int i = 0; i < 20000; i++) {
        bool r0 = false, r1 = true;
        struct gs_cel_error err;
        if (gs_cel_eval(t->p, &devs[0], &r0, &err) || gs_cel_eval(t->p, &devs[1], &r1, &err)) return NULL;
        if (!r0 || r1) return NULL;
    }
    t->ok = 1;
    return NULL;
}

static void test_threads_share_program(void **state)
{
    (void)state;
    struct gs_cel_program *p = NULL;
    struct gs_cel_error err;
    assert_int_equal(gs_cel_compile("device.attributes['gpu.nvidia.com'].productName.matches('^NVIDIA H[0-9]+') && "
                                    "device.attributes['gpu.nvidia.com'].type + '' == 'gpu' && "
                                    "cel.bind(m, device.capacity['gpu.nvidia.com'].memory, m.isGreaterThan(quantity('40Gi')))",
                                    &p, &err), 0);
    pthread_t th[4];
    struct thr t[4];
    for (int i = 0; i < 4; i++) { t[i].p = p; t[i].ok = 0; assert_int_equal(pthread_create(&th[i], NULL, thr_main, &t[i]), 0); }
    for (int i = 0; i < 4; i++) { pthread_join(th[i], NULL); assert_int_equal(t[i].ok, 1); }
    gs_cel_free(p);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    struct gs_cel_program *p = (void *)1;
    struct gs_cel_error err;
    assert_int_equal(gs_cel_compile(NULL, &p, &err), GS_EINVAL);
    assert_null(p);
    assert_int_equal(gs_cel_compile("true", &p, NULL), 0);
    bool r;
    assert_int_equal(gs_cel_eval(p, NULL, &r, &err), GS_EINVAL);
    assert_int_equal(gs_cel_eval(p, &devs[0], &r, NULL), 0);
    assert_true(r);
    gs_cel_free(p);
    gs_cel_free(NULL);
    /* an embedded NUL ends the expression as C strings do: the rest is never seen */
    assert_int_equal(gs_cel_compile("true\0garbage", &p, &err), 0);
    gs_cel_free(p);
}

static void test_attribute_edge_values(void **state)
{
    (void)state;
    /* a device whose slice gave a version that is not semver: using it is an error, naming it */
    struct gs_cel_attr a[] = { { .domain = NV, .name = "driverVersion", .kind = GS_CEL_VERSION, .s = "550.54" },
                               { .domain = NV, .name = "nul", .kind = GS_CEL_NULL } };
    struct gs_cel_device d = { .driver = NV, .attrs = a, .nattrs = 2 };
    struct gs_cel_program *p = NULL;
    struct gs_cel_error err;
    assert_int_equal(gs_cel_compile(G("driverVersion") ".isGreaterThan(semver('1.0.0'))", &p, &err), 0);
    bool r;
    assert_int_equal(gs_cel_eval(p, &d, &r, &err), GS_EINVAL);
    assert_non_null(strstr(err.msg, "invalid semver \"550.54\""));
    gs_cel_free(p);
    assert_int_equal(gs_cel_compile(G("nul") " == null", &p, &err), 0);
    assert_int_equal(gs_cel_eval(p, &d, &r, &err), 0);
    assert_true(r);
    gs_cel_free(p);
    /* no driver, no attributes at all */
    struct gs_cel_device empty = { 0 };
    assert_int_equal(gs_cel_compile("device.driver == '' && !('gpu.nvidia.com' in device.attributes)", &p, &err), 0);
    assert_int_equal(gs_cel_eval(p, &empty, &r, &err), 0);
    assert_true(r);
    gs_cel_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_error_messages_carry_column),
        cmocka_unit_test(test_length_limit),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_cost_limit),
        cmocka_unit_test(test_threads_share_program),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_attribute_edge_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
