# SPDX-License-Identifier: MIT
# commit.cmake: writes OUT, a header naming the commit of the sources in SRC
# (git describe, "-dirty" with local changes), for weft-bench's reports. The
# file changes only when the commit does, so it rebuilds one object at most.
execute_process(COMMAND git -C ${SRC} describe --always --dirty --abbrev=12
	OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
	RESULT_VARIABLE status)
if(NOT status EQUAL 0 OR commit STREQUAL "")
	set(commit "unknown")
endif()
set(text "#define WBENCH_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS ${OUT})
	file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
	file(WRITE ${OUT} "${text}")
endif()
