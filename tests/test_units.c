/* test_units.c — sizes, bandwidths, times and plain numbers of qmesh/1 (engine/units.c):
 * exact values, the one-space rule, missing / unknown / wrong-dimension units (E-UNIT), negative,
 * zero, NaN, Inf, overflow and underflow (E-RANGE), message text, and exact formatting. */
#include "testlib.h"
#include "units.h"

#include <math.h>
#include <stdio.h>

static qm_status st;

static uint64_t size_ok(const char *text)
{
    uint64_t v = 0;
    qm_status_clear(&st);
    if (qm_units_parse_size(text, &v, &st) != QM_OK)
        qm_test_fail(__FILE__, __LINE__, "size '%s': %s %s", text, qm_code_name(st.code), st.msg);
    return v;
}

static double bw_ok(const char *text)
{
    double v = -1;
    qm_status_clear(&st);
    if (qm_units_parse_bandwidth(text, &v, &st) != QM_OK)
        qm_test_fail(__FILE__, __LINE__, "bandwidth '%s': %s %s", text, qm_code_name(st.code),
                     st.msg);
    return v;
}

static double time_ok(const char *text)
{
    double v = -1;
    qm_status_clear(&st);
    if (qm_units_parse_time(text, &v, &st) != QM_OK)
        qm_test_fail(__FILE__, __LINE__, "time '%s': %s %s", text, qm_code_name(st.code), st.msg);
    return v;
}

/* The parser fails with code and a message containing part. */
#define SIZE_ERR(text, code, part)                                                                 \
    do {                                                                                           \
        uint64_t v_ = 12345;                                                                       \
        qm_status_clear(&st);                                                                      \
        CHECK(qm_units_parse_size((text), &v_, &st) == (code));                                    \
        CHECK_ERR(st, code, part);                                                                 \
        CHECK(v_ == 12345); /* untouched on failure */                                             \
    } while (0)
#define BW_ERR(text, code, part)                                                                   \
    do {                                                                                           \
        double v_ = 0;                                                                             \
        qm_status_clear(&st);                                                                      \
        CHECK(qm_units_parse_bandwidth((text), &v_, &st) == (code));                               \
        CHECK_ERR(st, code, part);                                                                 \
    } while (0)
#define TIME_ERR(text, code, part)                                                                 \
    do {                                                                                           \
        double v_ = 0;                                                                             \
        qm_status_clear(&st);                                                                      \
        CHECK(qm_units_parse_time((text), &v_, &st) == (code));                                    \
        CHECK_ERR(st, code, part);                                                                 \
    } while (0)

static void test_sizes(void)
{
    CHECK_EQ_U64(size_ok("80 GiB"), 85899345920ull);
    CHECK_EQ_U64(size_ok("80GiB"), 85899345920ull); /* no space is fine */
    CHECK_EQ_U64(size_ok("1 B"), 1);
    CHECK_EQ_U64(size_ok("1.5 GiB"), 1610612736ull);
    CHECK_EQ_U64(size_ok("0.5 KiB"), 512);
    CHECK_EQ_U64(size_ok(".25 MiB"), 262144);
    CHECK_EQ_U64(size_ok("2 TiB"), 2199023255552ull);
    CHECK_EQ_U64(size_ok("81559 MiB"), 85520809984ull);
    CHECK_EQ_U64(size_ok("85045477376 B"), 85045477376ull);
    CHECK_EQ_U64(size_ok("2 TB"), 2000000000000ull);
    CHECK_EQ_U64(size_ok("141 GB"), 141000000000ull);
    CHECK_EQ_U64(size_ok("1.5 KB"), 1500);
    CHECK_EQ_U64(size_ok("1e3 MB"), 1000000000ull);
    CHECK_EQ_U64(size_ok("+4 KiB"), 4096);
    CHECK_EQ_U64(size_ok("80.000 GiB"), 85899345920ull); /* trailing zeros are not precision */
    CHECK_EQ_U64(size_ok("0.00000095367431640625 TiB"), 1048576); /* 2^-20 TiB, exact */
    CHECK_EQ_U64(size_ok("18446744073709551615 B"), UINT64_MAX);
    CHECK_EQ_U64(size_ok("17179869183 GiB"), UINT64_MAX - ((1ull << 30) - 1));

    SIZE_ERR("18446744073709551616 B", QM_E_RANGE, "'18446744073709551616 B' overflows 64 bits");
    SIZE_ERR("17179869184 GiB", QM_E_RANGE, "overflows 64 bits (largest size 18446744073709551615 B");
    SIZE_ERR("1e30 B", QM_E_RANGE, "overflows 64 bits");
    SIZE_ERR("0.1 KiB", QM_E_RANGE, "'0.1 KiB' is not a whole number of bytes (102.4 B)");
    SIZE_ERR("1.5 B", QM_E_RANGE, "is not a whole number of bytes (1.5 B)");
    SIZE_ERR("-1 GiB", QM_E_RANGE, "'-1 GiB' is negative; a size must be positive");
    SIZE_ERR("0 GiB", QM_E_RANGE, "'0 GiB' is zero; a size must be positive");
    SIZE_ERR("nan GiB", QM_E_RANGE, "'nan GiB' is not a number (NaN); a size must be finite");
    SIZE_ERR(".inf GiB", QM_E_RANGE, "'.inf GiB' is infinite");
    SIZE_ERR("80", QM_E_UNIT,
             "'80' has no unit; a size needs one of B, KiB, MiB, GiB, TiB, KB, MB, GB, TB "
             "(e.g. '80 GiB')");
    SIZE_ERR("80 ", QM_E_UNIT, "'80 ' has no unit");
    SIZE_ERR("80  GiB", QM_E_UNIT,
             "'80  GiB' has more than one space between the number and the unit");
    SIZE_ERR("80 Gib", QM_E_UNIT,
             "'80 Gib' has an unknown unit 'Gib'; did you mean 'GiB'? sizes use B, KiB, MiB, GiB, "
             "TiB, KB, MB, GB, TB");
    SIZE_ERR("16 EiB", QM_E_UNIT, "'16 EiB' has an unknown unit 'EiB'; sizes use B, KiB");
    SIZE_ERR("2 bytes", QM_E_UNIT, "did you mean 'B'?");
    SIZE_ERR("450 GB/s", QM_E_UNIT,
             "'450 GB/s' is a bandwidth, but a size is expected here; use B, KiB, MiB, GiB, TiB, "
             "KB, MB, GB, TB");
    SIZE_ERR("1 us", QM_E_UNIT, "'1 us' is a time, but a size is expected here");
    SIZE_ERR("GiB", QM_E_UNIT,
             "'GiB' is not a number with a unit; a size is written like '80 GiB'");
    SIZE_ERR("", QM_E_UNIT, "'' is empty; a size is written like '80 GiB'");
    SIZE_ERR(" 80 GiB", QM_E_UNIT, "is not a number with a unit");
    SIZE_ERR("0x10 B", QM_E_UNIT, "has an unknown unit 'x10 B'");
    SIZE_ERR("1,5 GiB", QM_E_UNIT, "unknown unit ',5 GiB'");
    SIZE_ERR("12345678901234567890123456789012345678901 B", QM_E_RANGE,
             "has more than 40 significant digits");
    SIZE_ERR("1.00000000000000000001 GiB", QM_E_RANGE, "has more than 20 significant digits");

    uint64_t v = 7;
    qm_status_clear(&st);
    CHECK(qm_units_parse_size_ex("0 B", QM_UNITS_ALLOW_ZERO, &v, &st) == QM_OK && v == 0);
    CHECK(qm_units_parse_size_ex("-0 B", QM_UNITS_ALLOW_ZERO, &v, &st) == QM_OK && v == 0);
    CHECK(qm_units_parse_size_ex("-2 B", QM_UNITS_ALLOW_ZERO, &v, &st) == QM_E_RANGE);
    CHECK_ERR(st, QM_E_RANGE, "'-2 B' is negative; a size must be zero or positive");
    CHECK(qm_units_parse_size(NULL, &v, &st) == QM_E_ARG);
}

static void test_bandwidths(void)
{
    CHECK(bw_ok("450 GB/s") == 450e9);
    CHECK(bw_ok("400 Gb/s") == 50e9); /* bits: 400 Gb/s = 50 GB/s exactly */
    CHECK(bw_ok("200 Gb/s") == 25e9);
    CHECK(bw_ok("100 Mb/s") == 12.5e6);
    CHECK(bw_ok("55.2 GB/s") == 55.2e9);
    CHECK(bw_ok("3.35 TB/s") == 3.35e12);
    CHECK(bw_ok("1555 MB/s") == 1555e6);
    CHECK(bw_ok("1 GiB/s") == 1073741824.0);
    CHECK(bw_ok("0.5 GiB/s") == 536870912.0);
    CHECK(bw_ok("20.6GB/s") == 20.6e9);
    CHECK(bw_ok("7 B/s") == 7.0);   /* the B/s extension (used by the dumper as a last resort) */
    CHECK(bw_ok("1e3 GB/s") == 1e12);

    BW_ERR("450", QM_E_UNIT,
           "'450' has no unit; a bandwidth needs one of MB/s, GB/s, TB/s, GiB/s, Mb/s, Gb/s, B/s "
           "(e.g. '450 GB/s')");
    BW_ERR("450 GiB", QM_E_UNIT, "'450 GiB' is a size, but a bandwidth is expected here; use MB/s");
    BW_ERR("400 Gbps", QM_E_UNIT, "'400 Gbps' has an unknown unit 'Gbps'; did you mean 'Gb/s'?");
    BW_ERR("400 gb/s", QM_E_UNIT, "did you mean 'GB/s'?");
    BW_ERR("1 us", QM_E_UNIT, "'1 us' is a time, but a bandwidth is expected here");
    BW_ERR("1e400 GB/s", QM_E_RANGE, "'1e400 GB/s' is too large (overflows a double)");
    BW_ERR("1e-400 GB/s", QM_E_RANGE, "'1e-400 GB/s' is too small to represent (underflows to 0)");
    BW_ERR("0 GB/s", QM_E_RANGE, "'0 GB/s' is zero; a bandwidth must be positive");
    BW_ERR("-5 GB/s", QM_E_RANGE, "'-5 GB/s' is negative; a bandwidth must be positive");
    BW_ERR("NaN GB/s", QM_E_RANGE, "'NaN GB/s' is not a number (NaN)");
    BW_ERR("Infinity GB/s", QM_E_RANGE, "'Infinity GB/s' is infinite");
    BW_ERR("450 GB/s/s", QM_E_UNIT, "unknown unit 'GB/s/s'");
}

static void test_times(void)
{
    CHECK(time_ok("1 us") == 1e-6);
    CHECK(time_ok("0.9 us") == 0.9e-6); /* the double nearest to 9e-7, rounded once */
    CHECK(time_ok("0.6 us") == 0.6e-6);
    CHECK(time_ok("2.7 us") == 2.7e-6);
    CHECK(time_ok("15.9 ms") == 15.9e-3);
    CHECK(time_ok("3 ns") == 3e-9);
    CHECK(time_ok("1 s") == 1.0);
    CHECK(time_ok("1.5s") == 1.5);

    TIME_ERR("1", QM_E_UNIT, "'1' has no unit; a time needs one of ns, us, ms, s (e.g. '0.9 us')");
    TIME_ERR("1 \xc2\xb5s", QM_E_UNIT, "did you mean 'us'? times use ns, us, ms, s");
    TIME_ERR("2 sec", QM_E_UNIT, "'2 sec' has an unknown unit 'sec'; did you mean 's'?");
    TIME_ERR("5 GB", QM_E_UNIT, "'5 GB' is a size, but a time is expected here; use ns, us, ms, s");
    TIME_ERR("1e-400 s", QM_E_RANGE, "underflows to 0");
    TIME_ERR("0 us", QM_E_RANGE, "'0 us' is zero; a time must be positive");
    TIME_ERR("-1 us", QM_E_RANGE, "negative");
    TIME_ERR("inf s", QM_E_RANGE, "'inf s' is infinite; a time must be finite");

    double v = 1;
    qm_status_clear(&st);
    CHECK(qm_units_parse_time_ex("0 us", QM_UNITS_ALLOW_ZERO, &v, &st) == QM_OK && v == 0.0);
    CHECK(qm_units_parse_bandwidth_ex("0 GB/s", QM_UNITS_ALLOW_ZERO, &v, &st) == QM_OK);
}

static void test_plain_numbers(void)
{
    uint64_t u = 0;
    qm_status_clear(&st);
    CHECK(qm_units_parse_uint("36", 0, 64, &u, &st) == QM_OK && u == 36);
    CHECK(qm_units_parse_uint("18446744073709551615", 0, UINT64_MAX, &u, &st) == QM_OK &&
          u == UINT64_MAX);
    CHECK(qm_units_parse_uint("18446744073709551616", 0, UINT64_MAX, &u, &st) == QM_E_RANGE);
    CHECK_ERR(st, QM_E_RANGE, "'18446744073709551616' is out of range; expected an integer in "
                              "[0, 18446744073709551615]");
    CHECK(qm_units_parse_uint("0", 1, 64, &u, &st) == QM_E_RANGE);
    CHECK_ERR(st, QM_E_RANGE, "'0' is out of range; expected an integer in [1, 64]");
    CHECK(qm_units_parse_uint("-1", 0, 64, &u, &st) == QM_E_RANGE);
    CHECK_ERR(st, QM_E_RANGE, "'-1' is negative; expected an integer in [0, 64]");
    CHECK(qm_units_parse_uint("3.5", 0, 64, &u, &st) == QM_E_TYPE);
    CHECK_ERR(st, QM_E_TYPE, "'3.5' is not an integer");
    CHECK(qm_units_parse_uint("", 0, 64, &u, &st) == QM_E_TYPE);
    CHECK(qm_units_parse_uint("1e3", 0, 5000, &u, &st) == QM_E_TYPE);
    CHECK(qm_units_parse_uint("12 ", 0, 64, &u, &st) == QM_E_TYPE);
    CHECK(u == UINT64_MAX); /* untouched by the failures */

    double d = 0;
    CHECK(qm_units_parse_real("0.824", &d, &st) == QM_OK && d == 0.824);
    CHECK(qm_units_parse_real("1e-3", &d, &st) == QM_OK && d == 1e-3);
    CHECK(qm_units_parse_real("-2.5", &d, &st) == QM_OK && d == -2.5);
    CHECK(qm_units_parse_real("1", &d, &st) == QM_OK && d == 1.0);
    CHECK(qm_units_parse_real("nan", &d, &st) == QM_E_RANGE);
    CHECK_ERR(st, QM_E_RANGE, "'nan' is not a number (NaN)");
    CHECK(qm_units_parse_real("1e999", &d, &st) == QM_E_RANGE);
    CHECK_ERR(st, QM_E_RANGE, "'1e999' is too large");
    CHECK(qm_units_parse_real("0.9 us", &d, &st) == QM_E_TYPE);
    CHECK_ERR(st, QM_E_TYPE, "'0.9 us' is not a plain number");
    CHECK(qm_units_parse_real("0x1p3", &d, &st) == QM_E_TYPE); /* no hexadecimal floats */
}

static void test_format(void)
{
    char buf[64];
    CHECK_STR(qm_units_format_size(0, buf, sizeof buf), "0 B");
    CHECK_STR(qm_units_format_size(85899345920ull, buf, sizeof buf), "80 GiB");
    CHECK_STR(qm_units_format_size(85520809984ull, buf, sizeof buf), "81559 MiB");
    CHECK_STR(qm_units_format_size(2199023255552ull, buf, sizeof buf), "2 TiB");
    CHECK_STR(qm_units_format_size(2000000000000ull, buf, sizeof buf), "2 TB");
    CHECK_STR(qm_units_format_size(85045477376ull, buf, sizeof buf), "85045477376 B");
    CHECK_STR(qm_units_format_size(4096, buf, sizeof buf), "4 KiB");
    CHECK_STR(qm_units_format_size(12345, buf, sizeof buf), "12345 B");
    CHECK_STR(qm_units_format_size(UINT64_MAX, buf, sizeof buf), "18446744073709551615 B");

    CHECK_STR(qm_units_format_bandwidth(450e9, buf, sizeof buf), "450 GB/s");
    CHECK_STR(qm_units_format_bandwidth(3.35e12, buf, sizeof buf), "3.35 TB/s");
    CHECK_STR(qm_units_format_bandwidth(50e9, buf, sizeof buf), "50 GB/s");
    CHECK_STR(qm_units_format_bandwidth(55.2e9, buf, sizeof buf), "55.2 GB/s");
    CHECK_STR(qm_units_format_bandwidth(12.5e6, buf, sizeof buf), "12.5 MB/s");
    CHECK_STR(qm_units_format_bandwidth(1073741824.0, buf, sizeof buf), "1 GiB/s");
    CHECK_STR(qm_units_format_bandwidth(7.0, buf, sizeof buf), "7 B/s");
    CHECK_STR(qm_units_format_bandwidth(400e9 / 8 + 0.125, buf, sizeof buf), "400.000000001 Gb/s");

    CHECK_STR(qm_units_format_time(2.7e-6, buf, sizeof buf), "2.7 us");
    CHECK_STR(qm_units_format_time(0.9e-6, buf, sizeof buf), "900 ns");
    CHECK_STR(qm_units_format_time(15.9e-3, buf, sizeof buf), "15.9 ms");
    CHECK_STR(qm_units_format_time(1.0, buf, sizeof buf), "1 s");
    CHECK_STR(qm_units_format_time(0.0, buf, sizeof buf), "0 s");
    CHECK_STR(qm_units_format_real(0.824, buf, sizeof buf), "0.824");
    CHECK_STR(qm_units_format_real(0.1 + 0.2, buf, sizeof buf), "0.30000000000000004");

    /* every value parses back exactly (deterministic pseudo-random values over many decades) */
    uint64_t x = 88172645463325252ull;
    int exact_bw = 0, exact_t = 0, exact_sz = 0;
    for (int i = 0; i < 2000; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double m = (double)(x >> 11) / 9007199254740992.0 + 0.5; /* [0.5, 1.5) */
        double bw = ldexp(m, (int)(x % 60));                     /* up to ~1e18 B/s */
        double tm = ldexp(m, -(int)(x % 40));                    /* down to ~1e-12 s */
        double back = -1;
        qm_units_format_bandwidth(bw, buf, sizeof buf);
        exact_bw += qm_units_parse_bandwidth(buf, &back, NULL) == QM_OK && back == bw;
        qm_units_format_time(tm, buf, sizeof buf);
        exact_t += qm_units_parse_time(buf, &back, NULL) == QM_OK && back == tm;
        uint64_t sz = x >> (x % 64), sback = 0;
        qm_units_format_size(sz ? sz : 1, buf, sizeof buf);
        exact_sz += qm_units_parse_size(buf, &sback, NULL) == QM_OK && sback == (sz ? sz : 1);
    }
    CHECK(exact_bw == 2000);
    CHECK(exact_t == 2000);
    CHECK(exact_sz == 2000);
}

int main(void)
{
    test_sizes();
    test_bandwidths();
    test_times();
    test_plain_numbers();
    test_format();
    CHECK_STR(qm_unit_dim_name(QM_UNIT_BANDWIDTH), "bandwidths");
    CHECK_STR(qm_unit_dim_units(QM_UNIT_TIME), "ns, us, ms, s");
    return qm_test_end("test_units");
}
