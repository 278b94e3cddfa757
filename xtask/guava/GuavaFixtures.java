// Writes Guava BloomFilter streams and Guava's own mightContain answers for the golden
// fixtures in fixtures/guava/, and answers probes against streams written by bloom.
// Run by `cargo xtask guava-fixtures` (javac + java against Debian's libguava-java); CI never
// needs Java, it reads the committed outputs.
//
//   java GuavaFixtures generate OUTDIR
//       for every case below: OUTDIR/NAME.guava (BloomFilter.writeTo), OUTDIR/NAME.keys (the
//       inserted keys, one per line) and OUTDIR/NAME.probes ("1<TAB>key" or "0<TAB>key": Guava's
//       mightContain for inserted and never-inserted keys), plus OUTDIR/INDEX.
//   java GuavaFixtures answer STREAM FUNNEL QUESTIONS OUT
//       BloomFilter.readFrom(STREAM, FUNNEL), then mightContain for every line of QUESTIONS,
//       written to OUT as above.

import com.google.common.hash.BloomFilter;
import com.google.common.hash.Funnel;
import com.google.common.hash.Funnels;
import java.io.BufferedWriter;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

public final class GuavaFixtures {
    /** name, strategy, funnel, expected insertions, false-positive rate. */
    private static final Object[][] CASES = {
        {"mitz64-utf8-1000", "MURMUR128_MITZ_64", "utf8", 1000L, 0.01},
        {"mitz64-utf8-5000", "MURMUR128_MITZ_64", "utf8", 5000L, 0.001},
        {"mitz64-utf8-100-high-k", "MURMUR128_MITZ_64", "utf8", 100L, 1e-6},
        {"mitz64-chars-1000", "MURMUR128_MITZ_64", "chars", 1000L, 0.01},
        {"mitz64-long-2000", "MURMUR128_MITZ_64", "long", 2000L, 0.01},
        {"mitz32-utf8-1000", "MURMUR128_MITZ_32", "utf8", 1000L, 0.01},
        {"mitz32-chars-800", "MURMUR128_MITZ_32", "chars", 800L, 0.03},
        {"mitz32-long-1500", "MURMUR128_MITZ_32", "long", 1500L, 0.001},
    };

    private static final int PROBES_OF_INSERTED = 1000;
    private static final int PROBES_NEVER_INSERTED = 2000;

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("generate")) {
            generate(Paths.get(args[1]));
        } else if (args.length == 5 && args[0].equals("answer")) {
            answer(Paths.get(args[1]), args[2], Paths.get(args[3]), Paths.get(args[4]));
        } else {
            System.err.println("usage: GuavaFixtures generate OUTDIR | answer STREAM FUNNEL QUESTIONS OUT");
            System.exit(2);
        }
    }

    /** Keys of every kind of text: ASCII, Cyrillic, CJK, and astral (a surrogate pair in UTF-16). */
    static String textKey(String prefix, long i) {
        switch ((int) (i % 5)) {
            case 0: return prefix + "-ключ-" + i;
            case 1: return prefix + "-键-" + i;
            case 2: return prefix + "-\uD83D\uDD11-" + i;
            default: return prefix + "-record-" + i;
        }
    }

    /** Numbers of both signs and all magnitudes. */
    static long longKey(long salt, long i) {
        long x = (i + 1) * 0x9E3779B97F4A7C15L ^ salt;
        return (i % 3 == 0) ? x : (i % 3 == 1 ? -i - salt : i * 1000003L + salt);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static Funnel<Object> funnel(String name) {
        switch (name) {
            case "utf8": return (Funnel) Funnels.stringFunnel(StandardCharsets.UTF_8);
            case "chars": return (Funnel) Funnels.unencodedCharsFunnel();
            case "long": return (Funnel) Funnels.longFunnel();
            default: throw new IllegalArgumentException("unknown funnel " + name);
        }
    }

    static Object parse(String funnel, String line) {
        return funnel.equals("long") ? (Object) Long.parseLong(line) : (Object) line;
    }

    /** BloomFilter.create with an explicit strategy: package-private in Guava, reached by reflection. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static BloomFilter<Object> create(Funnel<Object> funnel, long n, double p, String strategy) throws Exception {
        Class strategies = Class.forName("com.google.common.hash.BloomFilterStrategies");
        Object chosen = Enum.valueOf(strategies, strategy);
        Class strategyType = Class.forName("com.google.common.hash.BloomFilter$Strategy");
        Method create = BloomFilter.class.getDeclaredMethod(
            "create", Funnel.class, long.class, double.class, strategyType);
        create.setAccessible(true);
        return (BloomFilter<Object>) create.invoke(null, funnel, n, p, chosen);
    }

    static void generate(Path out) throws Exception {
        Files.createDirectories(out);
        StringBuilder index = new StringBuilder();
        for (Object[] c : CASES) {
            String name = (String) c[0];
            String strategy = (String) c[1];
            String funnelName = (String) c[2];
            long n = (Long) c[3];
            double p = (Double) c[4];
            Funnel<Object> funnel = funnel(funnelName);
            BloomFilter<Object> filter = create(funnel, n, p, strategy);
            List<String> keys = new ArrayList<>();
            for (long i = 0; i < n; i++) {
                String key = funnelName.equals("long") ? Long.toString(longKey(7, i)) : textKey("key", i);
                keys.add(key);
                filter.put(parse(funnelName, key));
            }
            try (OutputStream stream = new FileOutputStream(out.resolve(name + ".guava").toFile())) {
                filter.writeTo(stream);
            }
            Files.write(out.resolve(name + ".keys"), lines(keys));
            List<String> probes = new ArrayList<>();
            for (int i = 0; i < Math.min(PROBES_OF_INSERTED, keys.size()); i++) {
                probes.add(keys.get(i));
            }
            for (long i = 0; i < PROBES_NEVER_INSERTED; i++) {
                probes.add(funnelName.equals("long") ? Long.toString(longKey(1_000_003, i)) : textKey("probe", i));
            }
            writeAnswers(filter, funnelName, probes, out.resolve(name + ".probes"));
            index.append(name).append('\t').append(strategy).append('\t').append(funnelName)
                .append('\t').append(n).append('\t').append(p).append('\n');
        }
        Files.write(out.resolve("INDEX"), index.toString().getBytes(StandardCharsets.UTF_8));
    }

    static void answer(Path stream, String funnelName, Path questions, Path out) throws IOException {
        BloomFilter<Object> filter;
        try (InputStream in = new FileInputStream(stream.toFile())) {
            filter = BloomFilter.readFrom(in, funnel(funnelName));
        }
        List<String> probes = Files.readAllLines(questions, StandardCharsets.UTF_8);
        writeAnswers(filter, funnelName, probes, out);
    }

    static void writeAnswers(BloomFilter<Object> filter, String funnelName, List<String> probes, Path out)
            throws IOException {
        try (BufferedWriter w = Files.newBufferedWriter(out, StandardCharsets.UTF_8)) {
            for (String probe : probes) {
                w.write(filter.mightContain(parse(funnelName, probe)) ? "1\t" : "0\t");
                w.write(probe);
                w.write('\n');
            }
        }
    }

    static byte[] lines(List<String> keys) {
        StringBuilder b = new StringBuilder();
        for (String k : keys) {
            b.append(k).append('\n');
        }
        return b.toString().getBytes(StandardCharsets.UTF_8);
    }
}
