/*
 * test_codec.c - YAML/JSON decoding and encoding: scalar typing, streams,
 * anchors, duplicate keys, error positions, and round trips that must keep
 * every unknown field.
 */
#include "core/codec.h"
#include "core/object.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static json_t *yaml1(const char *text)
{
    struct gs_docs docs;
    struct gs_diags d = {0};
    int rc = gs_yaml_decode_stream(text, strlen(text), &docs, &d, NULL);
    if (rc) fprintf(stderr, "unexpected error: %s\n", d.n ? d.v[0].msg : "?");
    assert_int_equal(rc, 0);
    assert_int_equal(docs.n, 1);
    json_t *v = json_incref(docs.docs[0]);
    gs_docs_free(&docs);
    gs_diags_free(&d);
    return v;
}

/* Decodes text expecting a syntax error; returns its message (static buffer). */
static const char *yaml_err(const char *text, size_t *err_doc)
{
    static char msg[256];
    struct gs_docs docs;
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(text, strlen(text), &docs, &d, err_doc), GS_EPARSE);
    assert_int_equal(docs.n, 0);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "");
    snprintf(msg, sizeof msg, "%s", d.v[0].msg);
    gs_diags_free(&d);
    return msg;
}

static void assert_json_text(const json_t *v, const char *want)
{
    char *s = gs_json_encode(v, 0);
    assert_non_null(s);
    assert_string_equal(s, want);
    free(s);
}

static void test_scalar_typing(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *json;
    } cases[] = {
        {"v: yes", "\"yes\""},  {"v: on", "\"on\""},     {"v: No", "\"No\""},    {"v: y", "\"y\""},
        {"v: true", "true"},    {"v: True", "true"},     {"v: FALSE", "false"},  {"v: ~", "null"},
        {"v:", "null"},         {"v: Null", "null"},     {"v: 12", "12"},        {"v: -12", "-12"},
        {"v: +7", "7"},         {"v: 012", "12"},        {"v: 0o17", "15"},      {"v: 0x1f", "31"},
        {"v: 1.5", "1.5"},      {"v: .5", "0.5"},        {"v: 1e3", "1000.0"},   {"v: '12'", "\"12\""},
        {"v: \"true\"", "\"true\""}, {"v: !!str 12", "\"12\""}, {"v: ! 12", "\"12\""},
        {"v: 99999999999999999999", "\"99999999999999999999\""},
        {"v: -9223372036854775808", "-9223372036854775808"},
        {"v: 1e999", "\"1e999\""}, {"v: .inf", "\".inf\""}, {"v: .nan", "\".nan\""},
        {"v: 1_000", "\"1_000\""}, {"v: 500m", "\"500m\""}, {"v: 0x", "\"0x\""}, {"v: 1.2.3", "\"1.2.3\""},
        {"v: 12:30", "\"12:30\""}, {"v: 0b101", "\"0b101\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *v = yaml1(cases[i].yaml);
        json_t *got = json_object_get(v, "v");
        assert_non_null(got);
        char *s = gs_json_encode(got, 0);
        if (strcmp(s, cases[i].json)) fprintf(stderr, "case %s: got %s want %s\n", cases[i].yaml, s, cases[i].json);
        assert_string_equal(s, cases[i].json);
        free(s);
        json_decref(v);
    }
}

static void test_json_big_numbers(void **state)
{
    (void)state;
    const char *t = "{\"a\": 123456789012345678901234, \"b\": [1e999, -5], \"c\": \"x1e999\"}";
    json_t *v;
    struct gs_diags d = {0};
    assert_int_equal(gs_json_decode(t, strlen(t), &v, &d), 0);
    assert_json_text(v, "{\"a\":\"123456789012345678901234\",\"b\":[\"1e999\",-5],\"c\":\"x1e999\"}");
    json_decref(v);
    struct gs_docs docs;
    assert_int_equal(gs_decode_stream(t, strlen(t), &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 1);
    assert_string_equal(json_string_value(json_object_get(docs.docs[0], "a")), "123456789012345678901234");
    gs_docs_free(&docs);
}

static void test_multi_doc(void **state)
{
    (void)state;
    const char *t = "# leading comment\na: 1\n---\n---\n# only a comment\n---\nb: 2\n...\n---\n- c\n";
    struct gs_docs docs;
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(t, strlen(t), &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 3); /* the empty documents are skipped */
    assert_json_text(docs.docs[0], "{\"a\":1}");
    assert_json_text(docs.docs[1], "{\"b\":2}");
    assert_json_text(docs.docs[2], "[\"c\"]");
    assert_int_equal(docs.lines[0], 2);
    assert_int_equal(docs.lines[1], 6);
    assert_int_equal(docs.lines[2], 9);
    gs_docs_free(&docs);
    assert_int_equal(gs_decode_stream("", 0, &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 0);
    assert_int_equal(d.n, 0);
}

static void test_json_lists(void **state)
{
    (void)state;
    const char *list = "\n{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"kind\":\"Pod\"},{\"kind\":\"Node\"}]}";
    const char *arr = "[{\"a\":1},\n{\"b\":2}] {\"c\":3}\n{\"kind\":\"PodList\",\"items\":[{\"d\":4}]}";
    struct gs_docs docs;
    struct gs_diags d = {0};
    assert_int_equal(gs_decode_stream(list, strlen(list), &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 2);
    assert_json_text(docs.docs[1], "{\"kind\":\"Node\"}");
    assert_int_equal(docs.lines[0], 2);
    gs_docs_free(&docs);
    assert_int_equal(gs_decode_stream(arr, strlen(arr), &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 4);
    assert_json_text(docs.docs[2], "{\"c\":3}");
    assert_json_text(docs.docs[3], "{\"d\":4}");
    assert_int_equal(docs.lines[2], 2);
    assert_int_equal(docs.lines[3], 3);
    gs_docs_free(&docs);
    /* a YAML List is split too (kubectl get -o yaml); a YAML sequence is not */
    const char *yl = "apiVersion: v1\nkind: List\nitems:\n- {kind: Pod}\n- {kind: Node}\n---\n- [x]\n";
    assert_int_equal(gs_decode_stream(yl, strlen(yl), &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 3);
    assert_json_text(docs.docs[1], "{\"kind\":\"Node\"}");
    assert_json_text(docs.docs[2], "[[\"x\"]]");
    assert_int_equal(docs.lines[2], 6); /* the line of its --- */
    gs_docs_free(&docs);
    assert_int_equal(gs_yaml_decode_stream(yl, strlen(yl), &docs, &d, NULL), 0);
    assert_int_equal(docs.n, 2);
    gs_docs_free(&docs);
    assert_int_equal(d.n, 0);
}

static void test_anchors(void **state)
{
    (void)state;
    json_t *v = yaml1("base: &b {cpu: 1, tags: [x, y]}\ncopy: *b\nname: &n hello\nkey: {*n : 3}\n");
    assert_true(json_equal(json_object_get(v, "base"), json_object_get(v, "copy")));
    assert_ptr_not_equal(json_object_get(v, "base"), json_object_get(v, "copy")); /* deep copies */
    assert_json_text(json_object_get(v, "key"), "{\"hello\":3}");
    json_decref(v);
}

static void test_alias_errors(void **state)
{
    (void)state;
    size_t doc = 0;
    assert_string_equal(yaml_err("a: 1\n---\nb: *nope\n", &doc), "line 3 column 4: unknown alias \"nope\"");
    assert_int_equal(doc, 2);
    /* an alias to its own ancestor is not yet registered: no cycles */
    assert_string_equal(yaml_err("a: &x [1, *x]\n", NULL), "line 1 column 11: unknown alias \"x\"");
    /* billion laughs */
    char buf[2048] = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i < 9; i++) {
        char line[128];
        snprintf(line, sizeof line, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i,
                 i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        strcat(buf, line);
    }
    const char *m = yaml_err(buf, &doc);
    assert_non_null(strstr(m, "aliases expand to more than 100000 nodes"));
    assert_int_equal(doc, 1);
}

static void test_duplicate_keys_and_syntax(void **state)
{
    (void)state;
    size_t doc = 0;
    assert_string_equal(yaml_err("x: 1\n---\na: 1\nb: {c: 1, c: 2}\n", &doc), "line 4 column 11: duplicate key \"c\"");
    assert_int_equal(doc, 2);
    assert_string_equal(yaml_err("{\"a\": 1,\n \"a\": 2}", &doc), "line 2 column 4: duplicate object key near '\"a\"'");
    assert_int_equal(doc, 1);
    const char *m = yaml_err("a: [1, 2\nb: 3\n", NULL);
    assert_int_equal(strncmp(m, "line 2 column 2: ", 17), 0);
    m = yaml_err("a: b: c\n", NULL);
    assert_string_equal(m, "line 1 column 5: mapping values are not allowed in this context");
    m = yaml_err("? [a]\n: 1\n", NULL);
    assert_string_equal(m, "line 1 column 3: mapping keys must be scalars");
    m = yaml_err("{\"a\": [1, 2,]}", NULL);
    assert_int_equal(strncmp(m, "line 1 column 13: ", 18), 0);
    /* a JSON document after a good one: error positions count from the stream start */
    m = yaml_err("{\"a\": 1}\n\n  {\"b\" 2}", &doc);
    assert_int_equal(doc, 2);
    assert_int_equal(strncmp(m, "line 3 column ", 14), 0);
}

static void test_depth_limit(void **state)
{
    (void)state;
    char *deep = malloc(6000);
    memset(deep, '[', 3000);
    memset(deep + 3000, ']', 3000);
    struct gs_docs docs;
    struct gs_diags d = {0};
    /* starts with '[' so it is JSON: jansson's own limit (2048) applies */
    assert_int_equal(gs_decode_stream(deep, 6000, &docs, &d, NULL), GS_EPARSE);
    assert_non_null(strstr(d.v[0].msg, "maximum parsing depth"));
    gs_diags_free(&d);
    memmove(deep + 1000, deep + 5000, 1000);
    deep[0] = ' ';
    memcpy(deep, "a: ", 3);
    assert_int_equal(gs_yaml_decode_stream(deep, 1999, &docs, &d, NULL), GS_EPARSE);
    assert_non_null(strstr(d.v[0].msg, "nesting deeper than 512"));
    gs_diags_free(&d);
    free(deep);
}

/* The server's pre-parse depth check: brackets in strings do not count, and
 * the first place past the limit is named. */
static void test_text_depth(void **state)
{
    (void)state;
    const char *t1 = "{\"a\":\"[[[{\",\"b\":\"\\\"[\",\"c\":[{}]}";
    assert_int_equal(gs_json_text_depth("7", 1, 64, NULL, NULL), 0);
    assert_int_equal(gs_json_text_depth("{}", 2, 64, NULL, NULL), 1);
    assert_int_equal(gs_json_text_depth(t1, strlen(t1), 64, NULL, NULL), 3);
    json_t *v = json_loads(t1, 0, NULL);
    assert_non_null(v);
    assert_int_equal(gs_json_depth(v), 3);
    json_decref(v);
    int line = 0, col = 0;
    assert_int_equal(gs_json_text_depth("{\n  \"x\": [[1]]}", 15, 2, &line, &col), 3);
    assert_int_equal(line, 2);
    assert_int_equal(col, 9);
    /* Deeper than jansson parses: counted only up to the limit plus one. */
    char *deep = malloc(100000);
    memset(deep, '[', 100000);
    assert_int_equal(gs_json_text_depth(deep, 100000, GS_JSON_MAX_DEPTH, &line, &col), GS_JSON_MAX_DEPTH + 1);
    assert_int_equal(col, GS_JSON_MAX_DEPTH + 1);
    free(deep);
    json_t *one = json_integer(1);
    assert_int_equal(gs_json_depth(one), 0);
    json_decref(one);
}

static const char *unknown_fields_yaml =
    "apiVersion: v1\n"
    "kind: Pod\n"
    "extraTop: {deep: [1, 2.5, null, true, \"yes\", '0x10']}\n"
    "metadata:\n"
    "  name: p\n"
    "  finalizers: [example.com/x]\n"
    "  ownerReferences: [{kind: Job, name: j, controller: true}]\n"
    "spec:\n"
    "  restartPolicy: Never\n"
    "  unknownSpec: {a: {b: {c: \"\"}}}\n"
    "  containers:\n"
    "  - name: c\n"
    "    image: busybox\n"
    "    env: [{name: A, value: \"1\"}]\n"
    "    resources:\n"
    "      requests: {cpu: 500m, memory: 1Gi, example.com/foo: 2}\n"
    "      limits: {example.com/foo: 2}\n"
    "      claims: [{name: gpu}]\n"
    "    unknownContainerField: [[], {}]\n"
    "status: {phase: Pending, unknownStatus: 99999999999999999999}\n";

/* decode -> object -> encode -> decode gives the same tree, through JSON and YAML. */
static void test_round_trip_unknown_fields(void **state)
{
    (void)state;
    json_t *orig = yaml1(unknown_fields_yaml);
    struct gs_object *o;
    struct gs_diags d = {0};
    assert_int_equal(gs_object_decode(orig, &o, &d), 0);
    for (int fmt = 0; fmt < 2; fmt++) {
        char *text = fmt ? gs_yaml_encode(gs_object_to_json(o)) : gs_json_encode(gs_object_to_json(o), fmt);
        assert_non_null(text);
        struct gs_docs docs;
        assert_int_equal(gs_decode_stream(text, strlen(text), &docs, &d, NULL), 0);
        assert_int_equal(docs.n, 1);
        assert_true(json_equal(docs.docs[0], orig));
        struct gs_object *o2;
        assert_int_equal(gs_object_decode(docs.docs[0], &o2, &d), 0);
        assert_true(json_equal(gs_object_to_json(o2), orig));
        gs_object_free(o2);
        gs_docs_free(&docs);
        free(text);
    }
    gs_object_free(o);
    json_decref(orig);
    assert_int_equal(d.n, 0);
}

static void test_yaml_encode_quoting(void **state)
{
    (void)state;
    const char *j = "{\"s1\":\"yes\",\"s2\":\"123\",\"s3\":\"\",\"s4\":\"true\",\"s5\":\"null\",\"s6\":\"~\","
                    "\"s7\":\"a: b\",\"s8\":\"- x\",\"s9\":\"line1\\nline2\\n\",\"s10\":\"1.5\",\"s11\":\"#c\","
                    "\"s12\":\"tab\\there\",\"s13\":\"caf\\u00e9\",\"s14\":\"  lead\",\"n1\":1.5,\"n2\":100.0,"
                    "\"n3\":-7,\"n4\":1e300,\"n5\":0.1,\"b\":false,\"z\":null,\"e1\":{},\"e2\":[],"
                    "\"yes\":\"key is quoted\",\"1\":\"numeric key\"}";
    json_t *v;
    struct gs_diags d = {0};
    assert_int_equal(gs_json_decode(j, strlen(j), &v, &d), 0);
    char *y = gs_yaml_encode(v);
    assert_non_null(y);
    assert_non_null(strstr(y, "s1: \"yes\"\n"));
    assert_non_null(strstr(y, "s13: café\n"));
    assert_non_null(strstr(y, "n1: 1.5\n"));
    assert_non_null(strstr(y, "n2: 100.0\n"));
    json_t *back = yaml1(y);
    assert_true(json_equal(v, back));
    char *k1 = gs_json_encode(v, 0), *k2 = gs_json_encode(back, 0);
    assert_string_equal(k1, k2); /* key order kept too */
    free(k1);
    free(k2);
    free(y);
    json_decref(back);
    json_decref(v);
}

static void test_read_file(void **state)
{
    (void)state;
    char *buf;
    size_t len;
    assert_int_equal(gs_read_file("/nonexistent/gpusched/file.yaml", &buf, &len), GS_ENOENT);
    char path[] = "/tmp/gs_codec_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "a: 1\n", 5), 5);
    close(fd);
    assert_int_equal(gs_read_file(path, &buf, &len), 0);
    assert_int_equal(len, 5);
    assert_string_equal(buf, "a: 1\n");
    free(buf);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scalar_typing),
        cmocka_unit_test(test_json_big_numbers),
        cmocka_unit_test(test_multi_doc),
        cmocka_unit_test(test_json_lists),
        cmocka_unit_test(test_anchors),
        cmocka_unit_test(test_alias_errors),
        cmocka_unit_test(test_duplicate_keys_and_syntax),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_text_depth),
        cmocka_unit_test(test_round_trip_unknown_fields),
        cmocka_unit_test(test_yaml_encode_quoting),
        cmocka_unit_test(test_read_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
