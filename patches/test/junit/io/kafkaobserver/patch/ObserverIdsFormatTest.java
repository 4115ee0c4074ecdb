/*
 * Part of kafka-observer-operator's observer patch for Apache Kafka (Apache License 2.0).
 */
package io.kafkaobserver.patch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The observer.ids text format (pure functions, no file system). */
class ObserverIdsFormatTest {

    private static Set<Integer> ids(String text) {
        ObserverIdsFormat.Parsed parsed = ObserverIdsFormat.parse(text);
        assertFalse(parsed.onlyGarbage, "not garbage: " + text);
        return parsed.ids;
    }

    @Test
    void oneIdPerLine() {
        assertEquals(Set.of(4, 5), ids("4\n5\n"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"4,5", "4, 5", "4 5", "4\t5", "4\n5", "4\r\n5\r\n", " ,4,,, 5 ,", "4\n\n\n5", "4\u000b5"})
    void commasAndWhitespaceSeparate(String text) {
        assertEquals(Set.of(4, 5), ids(text));
    }

    @Test
    void aLineStartingWithHashIsAComment() {
        assertEquals(Set.of(7), ids("# observers: 1, 2\n   # indented 3\n\t#4\n7\n"));
    }

    @Test
    void thereAreNoInlineComments() {
        // "3 # was 4": the 4 counts, "#", "was" are garbage tokens next to integers (ignored).
        assertEquals(Set.of(3, 4), ids("3 # was 4\n"));
    }

    @Test
    void tokensThatAreNotIntegersAreIgnoredNextToIntegers() {
        assertEquals(Set.of(1, 4), ids("broker-2 4 x 1.5 1 0x10 99999999999\n"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"garbage", "a, b\nc", "# comment\nnot-a-number\n", "1.5", "99999999999"})
    void onlyGarbageIsFlagged(String text) {
        ObserverIdsFormat.Parsed parsed = ObserverIdsFormat.parse(text);
        assertTrue(parsed.onlyGarbage, text);
        assertTrue(parsed.ids.isEmpty());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "\n", "   \n\t\n", "# nothing here\n", "#\n# 4\n", ",,,", ", ,\n"})
    void emptyOrOnlyCommentsMeansNoObserversNotGarbage(String text) {
        ObserverIdsFormat.Parsed parsed = ObserverIdsFormat.parse(text);
        assertFalse(parsed.onlyGarbage, "'" + text + "'");
        assertTrue(parsed.ids.isEmpty());
    }

    @Test
    void duplicatesCollapseAndSignsParse() {
        assertEquals(Set.of(-1, 4), ids("4 4 +4 -1\n4"));
    }

    @Test
    void theSetIsUnmodifiable() {
        Set<Integer> set = ids("4");
        assertThrows(UnsupportedOperationException.class, () -> set.add(5));
    }

    @Test
    void theEnvironmentFallbackUsesTheSameRules() {
        assertEquals(Set.of(4, 5), ObserverIdsFormat.ids("4, 5"));
        assertEquals(Set.of(), ObserverIdsFormat.ids("x"));
        assertEquals(Set.of(), ObserverIdsFormat.ids(""));
    }

    @Test
    void renderIsSortedAndMinusIsTheDifference() {
        assertEquals("[1, 4, 10]", ObserverIdsFormat.render(Set.of(10, 4, 1)));
        assertEquals("[]", ObserverIdsFormat.render(Set.of()));
        assertEquals(Set.of(1), ObserverIdsFormat.minus(Set.of(1, 4), Set.of(4, 5)));
        assertEquals(Set.of(), ObserverIdsFormat.minus(Set.of(), Set.of(4)));
    }
}
