// dist/log.h's number format: grouped(n), the thousands separated by commas as Python's
// f"{n:,}" writes them (the values below are Python's), from 0 to both ends of int64.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "dist/log.h"

namespace {

TEST(Grouped, WritesThousandsAsPythonsCommaFormat) {
  EXPECT_EQ(dist::grouped(0), "0");
  EXPECT_EQ(dist::grouped(7), "7");
  EXPECT_EQ(dist::grouped(999), "999");
  EXPECT_EQ(dist::grouped(1000), "1,000");
  EXPECT_EQ(dist::grouped(-1000), "-1,000");
  EXPECT_EQ(dist::grouped(-999), "-999");
  EXPECT_EQ(dist::grouped(123456), "123,456");
  EXPECT_EQ(dist::grouped(1234567), "1,234,567");
  EXPECT_EQ(dist::grouped(10100896), "10,100,896");
  EXPECT_EQ(dist::grouped(std::numeric_limits<std::int64_t>::max()), "9,223,372,036,854,775,807");
  EXPECT_EQ(dist::grouped(std::numeric_limits<std::int64_t>::min()), "-9,223,372,036,854,775,808");
}

}  // namespace
