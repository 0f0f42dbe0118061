# SPDX-License-Identifier: MIT
# install-unit.cmake: writes weftd@.service for the prefix being installed
# into (CMAKE_INSTALL_PREFIX here is cmake --install's --prefix, if given)
# and installs it. Run by `cmake --install`, after CMakeLists.txt set
# weft_unit_template, weft_unit_out, weft_bindir, weft_sysconfdir,
# weft_unit_dir and weft_cluster_config (the configured values).
function(weft_install_dir out dir)
	if(IS_ABSOLUTE "${dir}")
		set(${out} "${dir}" PARENT_SCOPE)
	else()
		set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
	endif()
endfunction()

weft_install_dir(WEFT_BINDIR "${weft_bindir}")
set(WEFT_CLUSTER_CONFIG "${weft_cluster_config}")
if(NOT WEFT_CLUSTER_CONFIG)
	# GNUInstallDirs' rule for SYSCONFDIR, for this prefix.
	set(sysconfdir "${weft_sysconfdir}")
	if(IS_ABSOLUTE "${sysconfdir}")
	elseif(CMAKE_INSTALL_PREFIX MATCHES "^/(usr/?)?$")
		set(sysconfdir "/${sysconfdir}")
	elseif(CMAKE_INSTALL_PREFIX MATCHES "^/opt/(.*)")
		set(sysconfdir "/${sysconfdir}/opt/${CMAKE_MATCH_1}")
	else()
		set(sysconfdir "${CMAKE_INSTALL_PREFIX}/${sysconfdir}")
	endif()
	string(REGEX REPLACE "/+$" "" sysconfdir "${sysconfdir}")
	set(WEFT_CLUSTER_CONFIG "${sysconfdir}/weft/cluster.ini")
endif()
configure_file("${weft_unit_template}" "${weft_unit_out}" @ONLY)
weft_install_dir(unit_dir "${weft_unit_dir}")
file(INSTALL DESTINATION "${unit_dir}" TYPE FILE FILES "${weft_unit_out}")
