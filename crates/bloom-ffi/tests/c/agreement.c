/*
 * The C ABI's side of the golden-fixture contract, driven by tests/c_abi.rs.
 *
 *   agreement read MANIFEST
 *     Each line of MANIFEST is "SNAPSHOT\tKEYS\tANSWERS\tSAVED". The snapshot is loaded
 *     from its path and from a buffer; every key of KEYS (a u32 little-endian length, then
 *     the bytes, repeated) is answered one at a time and as a batch, which must agree; the
 *     answers ('1' maybe, '0' absent, 'E' refused key) go to ANSWERS after a line with the
 *     header's fields. The filter is saved to SAVED (and to a buffer, which must be the
 *     same bytes and load back to the same answers).
 *   agreement build KEYS SAVED ENCODING
 *     A new filter planned for the keys, each inserted (half one at a time, half as a
 *     batch), saved to SAVED.
 *   agreement damaged SNAPSHOT MAX_PAYLOAD_BYTES
 *     Prints the status name of loading, verifying and inspecting SNAPSHOT, with its message.
 *   agreement oom
 *     With its address space limited to 1 GiB (so that no overcommit setting lets it
 *     through), asks for a counting filter of 2e10 keys (about 90 GiB of counters) and prints
 *     the status name, with its message. Not for valgrind, which keeps its own address space.
 *
 * Exits 0 when every call went as expected, 1 otherwise (saying why on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bloom.h"

static int fail(const char *what, BloomStatus status) {
    fprintf(stderr, "%s: %s (%s)\n", what, bloom_status_name(status), bloom_last_error_message());
    return 1;
}

/* The whole file at `path`, or NULL. */
static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            unsigned char *bigger = realloc(buf, cap * 2);
            if (!bigger) { free(buf); buf = NULL; break; }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

/* Keys of a KEYS file: pointers into `data`. */
struct keys {
    unsigned char *data;
    const uint8_t **ptrs;
    size_t *lens;
    size_t count;
};

static int read_keys(const char *path, struct keys *keys) {
    size_t len = 0;
    keys->data = read_all(path, &len);
    if (!keys->data) return 1;
    size_t count = 0;
    for (size_t at = 0; at + 4 <= len;) {
        uint32_t n = keys->data[at] | keys->data[at + 1] << 8 | keys->data[at + 2] << 16 |
                     (uint32_t)keys->data[at + 3] << 24;
        at += 4 + n;
        count++;
    }
    keys->ptrs = calloc(count ? count : 1, sizeof *keys->ptrs);
    keys->lens = calloc(count ? count : 1, sizeof *keys->lens);
    keys->count = count;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t n = keys->data[at] | keys->data[at + 1] << 8 | keys->data[at + 2] << 16 |
                     (uint32_t)keys->data[at + 3] << 24;
        /* A zero-length key is given as a null pointer, which the ABI allows. */
        keys->ptrs[i] = n ? keys->data + at + 4 : NULL;
        keys->lens[i] = n;
        at += 4 + n;
    }
    return 0;
}

static void free_keys(struct keys *keys) {
    free(keys->data);
    free(keys->ptrs);
    free(keys->lens);
}

/* One answer per key, one at a time: '1', '0', or 'E' for a refused key. */
static int answer_each(const BloomFilter *filter, const struct keys *keys, char *out) {
    for (size_t i = 0; i < keys->count; i++) {
        bool maybe = false;
        BloomStatus s = bloom_filter_contains(filter, keys->ptrs[i], keys->lens[i], &maybe);
        if (s == BLOOM_ERR_KEY) {
            out[i] = 'E';
        } else if (s != BLOOM_OK) {
            return fail("bloom_filter_contains", s);
        } else {
            out[i] = maybe ? '1' : '0';
        }
    }
    out[keys->count] = '\0';
    return 0;
}

/* The batch form must answer as the single form: the runs between refused keys together. */
static int check_batch(const BloomFilter *filter, const struct keys *keys, const char *expected) {
    bool *answers = calloc(keys->count ? keys->count : 1, sizeof *answers);
    size_t start = 0;
    int bad = 0;
    while (start <= keys->count && !bad) {
        size_t end = start;
        while (end < keys->count && expected[end] != 'E') end++;
        BloomStatus s = bloom_filter_contains_batch(filter, keys->ptrs + start, keys->lens + start,
                                                    end - start, answers);
        if (s != BLOOM_OK) {
            bad = fail("bloom_filter_contains_batch", s);
            break;
        }
        for (size_t i = start; i < end; i++) {
            if ((answers[i - start] ? '1' : '0') != expected[i]) {
                fprintf(stderr, "batch answer %zu differs from the single answer\n", i);
                bad = 1;
            }
        }
        if (end < keys->count) {
            /* The refused key alone, as a batch: refused too. */
            s = bloom_filter_contains_batch(filter, keys->ptrs + end, keys->lens + end, 1, answers);
            if (s != BLOOM_ERR_KEY) {
                fprintf(stderr, "a refused key answered %s as a batch\n", bloom_status_name(s));
                bad = 1;
            }
        }
        start = end + 1;
    }
    free(answers);
    return bad;
}

static int read_one(char *line) {
    char *fields[4];
    char *rest = line;
    for (int i = 0; i < 4; i++) {
        fields[i] = strsep(&rest, "\t\n");
        if (!fields[i]) {
            fprintf(stderr, "bad manifest line\n");
            return 1;
        }
    }
    const char *snapshot = fields[0], *keys_path = fields[1], *answers_path = fields[2],
               *saved = fields[3];
    int bad = 0;
    BloomFilter *filter = NULL, *from_buffer = NULL, *reloaded = NULL;
    struct keys keys = {0};
    char *answers = NULL, *again = NULL;
    unsigned char *file = NULL, *buffer = NULL;
    size_t file_len = 0, buffer_len = 0;

    BloomStatus s = bloom_filter_load(snapshot, 0, &filter);
    if (s != BLOOM_OK) { bad = fail(snapshot, s); goto done; }
    file = read_all(snapshot, &file_len);
    if (!file) { fprintf(stderr, "cannot read %s\n", snapshot); bad = 1; goto done; }
    s = bloom_filter_load_buffer(file, file_len, 0, &from_buffer);
    if (s != BLOOM_OK) { bad = fail("bloom_filter_load_buffer", s); goto done; }
    if (read_keys(keys_path, &keys)) { fprintf(stderr, "cannot read %s\n", keys_path); bad = 1; goto done; }

    answers = malloc(keys.count + 1);
    again = malloc(keys.count + 1);
    if ((bad = answer_each(filter, &keys, answers))) goto done;
    if ((bad = answer_each(from_buffer, &keys, again))) goto done;
    if (strcmp(answers, again) != 0) {
        fprintf(stderr, "%s: answers differ between the path and the buffer\n", snapshot);
        bad = 1;
        goto done;
    }
    if ((bad = check_batch(filter, &keys, answers))) goto done;

    BloomHeaderInfo info;
    s = bloom_filter_header(filter, &info);
    if (s != BLOOM_OK) { bad = fail("bloom_filter_header", s); goto done; }
    BloomHeaderInfo on_disk;
    s = bloom_inspect(snapshot, 0, &on_disk);
    if (s != BLOOM_OK) { bad = fail("bloom_inspect", s); goto done; }
    s = bloom_verify(snapshot, 0, NULL);
    if (s != BLOOM_OK) { bad = fail("bloom_verify", s); goto done; }

    FILE *out = fopen(answers_path, "w");
    if (!out) { fprintf(stderr, "cannot write %s\n", answers_path); bad = 1; goto done; }
    fprintf(out, "%u %s %s %s %s %llu %u %llu %llu %d\n%s\n", on_disk.format_version, on_disk.kind,
            on_disk.rule, on_disk.layout, on_disk.encoding, (unsigned long long)on_disk.bits,
            on_disk.hashes, (unsigned long long)on_disk.items,
            (unsigned long long)info.dataset_generation, on_disk.salted, answers);
    fclose(out);

    /* Saved, and to a buffer: the same bytes, which answer the same. */
    s = bloom_filter_save(filter, saved, BLOOM_KEEP_GENERATION);
    if (s != BLOOM_OK) { bad = fail("bloom_filter_save", s); goto done; }
    s = bloom_filter_to_buffer(filter, BLOOM_KEEP_GENERATION, &buffer, &buffer_len);
    if (s != BLOOM_OK) { bad = fail("bloom_filter_to_buffer", s); goto done; }
    free(file);
    file = read_all(saved, &file_len);
    if (!file || file_len != buffer_len || memcmp(file, buffer, buffer_len) != 0) {
        fprintf(stderr, "%s: the saved file and the buffer differ\n", saved);
        bad = 1;
        goto done;
    }
    s = bloom_verify_buffer(buffer, buffer_len, 0, NULL);
    if (s != BLOOM_OK) { bad = fail("bloom_verify_buffer", s); goto done; }
    s = bloom_filter_load_buffer(buffer, buffer_len, 0, &reloaded);
    if (s != BLOOM_OK) { bad = fail("reloading the saved buffer", s); goto done; }
    if ((bad = answer_each(reloaded, &keys, again))) goto done;
    if (strcmp(answers, again) != 0) {
        fprintf(stderr, "%s: the saved filter answers differently\n", saved);
        bad = 1;
    }

done:
    bloom_filter_free(filter);
    bloom_filter_free(from_buffer);
    bloom_filter_free(reloaded);
    bloom_buffer_free(buffer, buffer_len);
    free(file);
    free(answers);
    free(again);
    free_keys(&keys);
    return bad;
}

static int run_read(const char *manifest) {
    FILE *f = fopen(manifest, "r");
    if (!f) { fprintf(stderr, "cannot read %s\n", manifest); return 1; }
    char line[8192];
    int bad = 0, lines = 0;
    while (fgets(line, sizeof line, f)) {
        bad |= read_one(line);
        lines++;
    }
    fclose(f);
    if (lines == 0) { fprintf(stderr, "empty manifest\n"); return 1; }
    return bad;
}

static int run_build(const char *keys_path, const char *saved, const char *encoding) {
    struct keys keys = {0};
    if (read_keys(keys_path, &keys)) { fprintf(stderr, "cannot read %s\n", keys_path); return 1; }
    BloomOptions options = bloom_options_default(keys.count + 1, 0.01);
    options.encoding = encoding;
    BloomFilter *filter = NULL;
    int bad = 0;
    BloomStatus s = bloom_filter_new_with(&options, &filter);
    if (s != BLOOM_OK) { bad = fail("bloom_filter_new_with", s); goto done; }
    size_t half = keys.count / 2;
    for (size_t i = 0; i < half; i++) {
        s = bloom_filter_insert(filter, keys.ptrs[i], keys.lens[i], NULL);
        if (s != BLOOM_OK) { bad = fail("bloom_filter_insert", s); goto done; }
    }
    uint64_t added = 0;
    s = bloom_filter_insert_batch(filter, keys.ptrs + half, keys.lens + half, keys.count - half, &added);
    if (s != BLOOM_OK) { bad = fail("bloom_filter_insert_batch", s); goto done; }
    s = bloom_filter_save(filter, saved, 7);
    if (s != BLOOM_OK) { bad = fail("bloom_filter_save", s); goto done; }
done:
    bloom_filter_free(filter);
    free_keys(&keys);
    return bad;
}

static int run_damaged(const char *snapshot, const char *max) {
    uint64_t limit = strtoull(max, NULL, 10);
    BloomFilter *filter = NULL;
    BloomStatus s = bloom_filter_load(snapshot, limit, &filter);
    printf("load %s %s\n", bloom_status_name(s), bloom_last_error_message());
    if ((s == BLOOM_OK) != (filter != NULL)) {
        fprintf(stderr, "the out-parameter was written on failure, or not on success\n");
        bloom_filter_free(filter);
        return 1;
    }
    bloom_filter_free(filter);
    s = bloom_verify(snapshot, limit, NULL);
    printf("verify %s %s\n", bloom_status_name(s), bloom_last_error_message());
    BloomHeaderInfo info;
    s = bloom_inspect(snapshot, limit, &info);
    printf("inspect %s %s\n", bloom_status_name(s), bloom_last_error_message());
    size_t len = 0;
    unsigned char *data = read_all(snapshot, &len);
    if (data) {
        filter = NULL;
        s = bloom_filter_load_buffer(data, len, limit, &filter);
        printf("load-buffer %s %s\n", bloom_status_name(s), bloom_last_error_message());
        bloom_filter_free(filter);
        free(data);
    }
    return 0;
}

static int run_oom(void) {
    struct rlimit limit = {1UL << 30, 1UL << 30};
    if (setrlimit(RLIMIT_AS, &limit) != 0) { perror("setrlimit"); return 1; }
    BloomOptions options = bloom_options_default(20000000000ULL, 0.01);
    options.kind = "counting";
    BloomFilter *filter = NULL;
    BloomStatus s = bloom_filter_new_with(&options, &filter);
    printf("new %s %s\n", bloom_status_name(s), bloom_last_error_message());
    if ((s == BLOOM_OK) != (filter != NULL)) {
        fprintf(stderr, "the out-parameter was written on failure, or not on success\n");
        return 1;
    }
    bloom_filter_free(filter);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "read") == 0) return run_read(argv[2]);
    if (argc == 5 && strcmp(argv[1], "build") == 0) return run_build(argv[2], argv[3], argv[4]);
    if (argc == 4 && strcmp(argv[1], "damaged") == 0) return run_damaged(argv[2], argv[3]);
    if (argc == 2 && strcmp(argv[1], "oom") == 0) return run_oom();
    fprintf(stderr, "usage: agreement read MANIFEST | build KEYS SAVED ENCODING | damaged SNAPSHOT MAX | oom\n");
    return 2;
}
