/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 */
package io.kafkaobserver.patch;

import java.util.Collections;
import java.util.Set;
import java.util.TreeSet;

/**
 * The observer.ids text format, shared with the public observer patch set: integers separated by
 * commas and/or whitespace; a line whose trimmed text starts with '#' is a comment; no inline
 * comments; tokens that are not integers are ignored; an empty file means "no observers".
 *
 * Pure functions only, so the rules can be tested without a file system.
 */
public final class ObserverIdsFormat {
    private ObserverIdsFormat() { }

    /** What a text said: the ids, and whether it carried tokens none of which were integers. */
    public static final class Parsed {
        public final Set<Integer> ids;
        /** True when the text had non-comment tokens but not a single integer among them. */
        public final boolean onlyGarbage;

        Parsed(Set<Integer> ids, boolean onlyGarbage) {
            this.ids = ids;
            this.onlyGarbage = onlyGarbage;
        }
    }

    public static Parsed parse(String text) {
        TreeSet<Integer> ids = new TreeSet<>();
        int tokens = 0;
        for (String line : text.split("\\R", -1)) {
            String trimmed = line.trim();
            if (trimmed.isEmpty() || trimmed.startsWith("#")) {
                continue;
            }
            for (String token : trimmed.split("[,\\s]+")) {
                if (token.isEmpty()) {
                    continue;
                }
                tokens++;
                Integer id = parseId(token);
                if (id != null) {
                    ids.add(id);
                }
            }
        }
        return new Parsed(Collections.unmodifiableSet(ids), tokens > 0 && ids.isEmpty());
    }

    /** The ids in a text; the environment fallback uses the same rules as the file. */
    public static Set<Integer> ids(String text) {
        return parse(text).ids;
    }

    private static Integer parseId(String token) {
        try {
            return Integer.valueOf(token);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** Renders a set as "[1, 4]" in ascending order, for the audit line. */
    public static String render(Set<Integer> ids) {
        return new TreeSet<>(ids).toString();
    }

    public static Set<Integer> minus(Set<Integer> a, Set<Integer> b) {
        TreeSet<Integer> out = new TreeSet<>(a);
        out.removeAll(b);
        return out;
    }
}
